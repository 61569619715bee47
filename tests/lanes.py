"""The changed lane (`scripts/test --changed`): the tests that exercise what a change touched.

Most of the suite grades through a `grade` process, a sandbox or a server, where no coverage tool
of the test's own process sees which module ran; so the lane reads an explicit map: for each part
of the project, the test files that exercise it beyond the unit tier. The fast lane's unit tests
always run (seconds; a `slow` one only with its file), a changed test file runs, and so does every
test file that imports a changed module of tests/support. A change to something the map does not
know (the build, the scripts) runs the whole suite, as does a change to the map itself. The tests
marked `docker` run only when the change touches the Docker sandbox, its image or the deployment
(DOCKER), and scripts/test sets up Docker and builds the images only then; CI runs them all.

    python -m tests.lanes [BASE]    prints the test files for the change against BASE (default:
                                    main; uncommitted changes count), comma-separated, for
                                    pytest's --lane option (conftest.py); or "all"
"""
from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXERCISE = ["test_grade_correct", "test_grade_buggy", "test_diagnosis", "test_trust", "test_fuzz",
            "test_head_exercise", "test_plugins"]
SANDBOX = ["test_local_sandbox", "test_root_sandbox", "test_grade_hostile", "test_grade_rejected",
           "test_attacks", "test_cli_contract", "test_terminal"]
# What a student's upload looks like before any sandbox (its bytes, its encoding, its name, a class
# folder's entries, a platform's upload folder): read by grader/submission.py, loaded in the worker
# by CPython's own import (sandbox/worker.py).
INPUT = ["test_encodings", "test_hostile_input", "test_grade_rejected"]
INSTRUCTOR = ["test_batch", "test_course", "test_classreport", "test_report_pages", "test_similarity",
              "test_platforms"]
SERVICE = ["test_serve", "test_serve_page", "test_serve_operations", "test_serve_database", "test_serve_queue"]
# (pattern of a changed path, the test files that exercise it), first match wins.
MAP: list[tuple[str, list[str]]] = [
    ("exercise/causal_attention_head/*", ["test_head_exercise", "test_plugins"]),
    ("exercise/causal_self_attention/*", [t for t in EXERCISE if t != "test_head_exercise"]),
    ("exercise/*", EXERCISE),
    ("sandbox/docker*", ["test_docker"]),
    ("Dockerfile", ["test_docker"]),
    ("sandbox/worker.py", SANDBOX + INPUT),
    ("sandbox/source.py", SANDBOX + INPUT),
    ("sandbox/*", SANDBOX),
    ("grader/service/*", SERVICE + ["test_deploy"]),
    ("grader/queue/*", ["test_queue", "test_serve_queue"]),
    ("grader/platforms.py", ["test_platforms", "test_hostile_input"]),
    ("grader/submission.py", INPUT + ["test_cli_contract", "test_batch", "test_platforms"]),
    ("grader/pool.py", ["test_batch", "test_queue", "test_attacks"]),
    ("grader/cli.py", ["test_cli_contract", "test_terminal", "test_batch", "test_course"]),
    ("grader/render.py", ["test_cli_contract", "test_terminal", "test_grade_buggy"]),
    ("grader/formats.py", ["test_cli_contract", "test_platforms"]),
    ("grader/grading.py", ["test_cli_contract", "test_grade_correct", "test_grade_rejected", "test_batch"]),
    ("grader/scoring.py", ["test_grade_buggy", "test_course", "test_batch"]),
    ("grader/*", INSTRUCTOR),
    ("deploy/*", ["test_deploy", "test_queue"]),
    ("examples/*", ["test_grade_correct", "test_grade_buggy", "test_cli_contract"]),
    ("tests/submissions/attacks/*", ["test_attacks"]),
    ("tests/submissions/head/*", ["test_head_exercise", "test_attacks"]),
    ("tests/submissions/fuzz/*", ["test_fuzz"]),
    ("tests/submissions/*", EXERCISE[:4] + ["test_grade_hostile", "test_grade_rejected", "test_local_sandbox"]),
    ("README.md", []), ("*.md", []), ("bench/*", []),
]


DOCKER = ("sandbox/docker*", "Dockerfile", "tests/test_docker.py", "deploy/*", "tests/test_deploy.py")


def changed(base: str) -> list[str]:
    """Paths changed against `base`, committed or not, and new untracked files."""
    def git(*args: str) -> list[str]:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    since = git("merge-base", base, "HEAD")[0]
    return sorted(set(git("diff", "--name-only", since)) | set(git("ls-files", "--others", "--exclude-standard")))


def selection(paths: list[str]) -> list[str] | None:
    """The test files for these changed paths; None: the whole suite."""
    files: set[str] = set()
    support = {p.removesuffix(".py").replace("/", ".") for p in paths if p.startswith("tests/support/")}
    for path in paths:
        if path.startswith("tests/test_") and path.endswith(".py"):
            files.add(Path(path).stem)
        elif path.startswith("tests/support/") or path == "tests/durations.json":
            continue
        elif path in ("tests/lanes.py", "tests/conftest.py"):
            return None
        else:
            for pattern, tests in MAP:
                if fnmatch.fnmatch(path, pattern):
                    files.update(tests)
                    break
            else:
                return None
    for test in (ROOT / "tests").glob("test_*.py"):
        imported = set(re.findall(r"^\s*(?:from|import) (tests\.support\.\w+)", test.read_text(), re.M))
        if imported & support:
            files.add(test.stem)
    return sorted(files)


def main() -> None:
    paths = changed(sys.argv[1] if len(sys.argv) > 1 else "main")
    chosen = selection(paths)
    if chosen is None:
        print("all")
        return
    docker = any(fnmatch.fnmatch(path, pattern) for path in paths for pattern in DOCKER)
    print(",".join([f"tests/{name}.py" for name in chosen] + (["+docker"] if docker else [])) or "none")


if __name__ == "__main__":
    main()
