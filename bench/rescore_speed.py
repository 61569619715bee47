"""A reweight of a stored class against its full regrade, in one run.

    .venv/bin/python bench/rescore_speed.py [--count 200] [--jobs 2]

Generates COUNT submissions as bench/batch_speed.py does, grades them once with `grade batch`
(the stored class), then, under a course file that changes only points, visibility and an advice
cost: (1) reruns into the same output folder, which rescores every submission from its stored run
without a sandbox, and (2) grades the class from scratch into a new folder with the same course.
Prints both times, the ratio, and whether the two gradebooks agree line for line (grading times aside).
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COURSE = """\
[groups.test_matches_multihead_attention]
points = 40
[groups.test_parameter_count]
points = 0
visibility = "hidden"
[advice.mask_device_mismatch]
points = 2
"""


def _generate():
    spec = importlib.util.spec_from_file_location("batch_speed", ROOT / "bench" / "batch_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate


def batch(folder: Path, out: Path, *extra: str) -> tuple[float, str]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), *extra],
                          capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 1):  # 1: some submission's grade failed, still a gradebook
        sys.exit(f"grade batch failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds, proc.stdout + proc.stderr


def _gradebook(out: Path) -> list[tuple]:
    """The gradebook's lines without the grading time (a rescore keeps the stored one)."""
    with open(out / "gradebook.csv", newline="") as f:
        return [tuple(v for k, v in row.items() if k != "duration_s") for row in csv.DictReader(f)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rescore-bench-") as tmp:
        root = Path(tmp)
        (root / "class").mkdir()
        _generate()(root / "class", args.count)
        course = root / "course.toml"
        course.write_text(COURSE)
        jobs = ("--jobs", str(args.jobs))
        first, _ = batch(root / "class", root / "stored", *jobs)
        print(f"stored class: {args.count} submissions graded in {first:.1f} s (--jobs {args.jobs})")
        rescore, output = batch(root / "class", root / "stored", "--course", str(course), *jobs)
        said = re.search(r"rescored [\d,]+ from stored runs in [\d.]+ s", output)
        full, _ = batch(root / "class", root / "full", "--course", str(course), *jobs)
        same = _gradebook(root / "stored") == _gradebook(root / "full")
        print(f"reweight, rescored from stored runs: {rescore:.1f} s for the whole command"
              f" ({said.group(0) if said else 'no rescore reported'})")
        print(f"reweight, full regrade:              {full:.1f} s")
        print(f"ratio (full / rescore):              {full / rescore:.1f}x")
        print(f"same gradebook both ways:            {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
