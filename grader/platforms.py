"""Where each course platform puts an upload and expects its results, and the Gradescope bundle.

Gradescope: the upload is in /autograder/submission, the results go to
/autograder/results/results.json, and the autograder is a zip with `setup.sh` (run once, as root,
when Gradescope builds its image) and `run_autograder` (run for every submission).
PrairieLearn: the upload is in /grade/student and the results go to /grade/results/results.json,
a folder the grader must create; the grader image is the external grader image.
"""
from __future__ import annotations

import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

import exercise as exercises
from grader.errors import GraderError
from sandbox.tidy import remove_tree


@dataclass(frozen=True)
class Platform:
    name: str
    format: str              # a name in grader.formats.FORMATS
    submission_dir: str      # under the platform's root
    results_file: str        # under the platform's root


GRADESCOPE = Platform("gradescope", "gradescope", "submission", "results/results.json")
PRAIRIELEARN = Platform("prairielearn", "prairielearn", "student", "results/results.json")
GRADESCOPE_ROOT = Path("/autograder")
PRAIRIELEARN_ROOT = Path("/grade")


def write_results(target: Path, text: str) -> None:
    """Write the results file as the last act of a grade, replacing whatever is there.

    Anything at `target` was not written by the grader (the student's code may have left a file, or
    a symlink pointing elsewhere), so it is removed first and the file is created anew, never
    followed through a link.
    """
    if target.parent.is_symlink():
        target.parent.unlink()
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        remove_tree(target)  # however deep a tree the student's code left there (sandbox.tidy)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text + "\n")


class ExportError(GraderError):
    """The bundle cannot be made here; the message says why."""


SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image: it installs the grader
# and its pinned CPU PyTorch into {prefix}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${{GRADER_PREFIX:-{prefix}}}
# PyTorch's CPU wheels (no CUDA, a few hundred MB instead of several GB).
export PIP_EXTRA_INDEX_URL=${{PIP_EXTRA_INDEX_URL:-https://download.pytorch.org/whl/cpu}}

python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python=$(command -v "$candidate"); break
  fi
done
if [ -z "$python" ]; then  # Gradescope's Ubuntu images: Python 3.11 is a package away
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  python=$(command -v python3.11)
fi
command -v unshare >/dev/null || {{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null; }}

"$python" -m venv "$prefix"
"$prefix/bin/pip" install --quiet --disable-pip-version-check "$here/attention-grader"
"$prefix/bin/grade" exercises
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grade /autograder/submission into
# /autograder/results/results.json. Exit status 1 means the grader itself failed: no score is
# recorded, and Gradescope shows the run as failed so that it can be rerun.
here=$(cd "$(dirname "$0")" && pwd)
root=${{AUTOGRADER_ROOT:-/autograder}}
{course}exec "${{GRADER:-{prefix}/bin/grade}}" platform gradescope --root "$root" \\
  --sandbox local --exercise {exercise}{course_flag}
"""
# Gradescope unzips the bundle into /autograder/source and copies run_autograder alone to
# /autograder: the course file is looked for there first, then beside the script (run from source/).
FIND_COURSE = """course=""
for candidate in "$root/source/{name}" "$here/{name}"; do
  if [ -f "$candidate" ]; then course=$candidate; break; fi
done
if [ -z "$course" ]; then
  echo "run_autograder: this autograder's {name} is in neither $root/source nor $here" >&2
  exit 1
fi
"""
COURSE_FILE = "course.toml"  # at the bundle's top, which Gradescope unzips into /autograder/source

PREFIX = "/opt/attention-grader"
SOURCE_PARTS = ("pyproject.toml", "README.md", "grader", "sandbox", "exercise")


def gradescope_bundle(out: Path, exercise: str, course: Path | None = None) -> int:
    """Write the Gradescope autograder zip; returns how many files it holds.

    The bundle carries the grader's source (setup.sh installs it with pip), so the tests are those
    of the exercise as it is here; the weights, visibility and time limit are the exercise's own,
    or those of `course`, a course file the bundle carries and run_autograder passes on.
    """
    root = Path(__file__).resolve().parent.parent
    missing = [p for p in SOURCE_PARTS if not (root / p).exists()]
    if missing:
        raise ExportError(f"the grader's source is not next to this installation ({', '.join(missing)} "
                          f"missing under {root}): run `grade export` from a checkout of the project")
    exercises.get(exercise)
    count = 0
    try:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
            run = RUN_AUTOGRADER.format(prefix=PREFIX, exercise=exercise,
                                        course=FIND_COURSE.format(name=COURSE_FILE) if course else "",
                                        course_flag=' --course "$course"' if course else "")
            for name, text in (("setup.sh", SETUP_SH.format(prefix=PREFIX)), ("run_autograder", run)):
                info = zipfile.ZipInfo(name)
                info.external_attr = (stat.S_IFREG | 0o755) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                bundle.writestr(info, text)
                count += 1
            if course:
                bundle.write(course, COURSE_FILE)
                count += 1
            for part in SOURCE_PARTS:
                for path in sorted([root / part] if (root / part).is_file() else (root / part).rglob("*")):
                    if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                        bundle.write(path, f"attention-grader/{path.relative_to(root)}")
                        count += 1
    except OSError as err:
        raise ExportError(f"cannot write {out}: {err.strerror or err}") from err
    return count
