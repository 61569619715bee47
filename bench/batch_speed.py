"""Batch grading speed: the naive way against warm sandboxes, on the same generated class.

    .venv/bin/python bench/batch_speed.py [--count 200] [--jobs 2] [--sandboxes local,docker]

Generates COUNT submissions from the project's own corpus (correct styles, the typical mistakes and
malformed uploads, in turn; each copy made unique by a comment, so no two share a content hash), then
grades the whole class with `grade batch` four ways in one run: per sandbox, `--cold` (the naive way:
a fresh sandbox and a cold start, imports and all, per submission) and warm (the default). Every run
starts from an empty output folder. Prints submissions per minute for each, the warm/naive ratio, and
whether every submission got the same status, score and bugs both ways.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "submissions"


def generate(folder: Path, count: int) -> dict[str, int]:
    """COUNT submissions in `folder`, taken in turn from the correct, buggy and malformed corpus."""
    kinds = {kind: sorted((CORPUS / kind).glob("*.py")) for kind in ("correct", "buggy", "malformed")}
    made = dict.fromkeys(kinds, 0)
    pools = {kind: itertools.cycle(paths) for kind, paths in kinds.items()}
    # 4 correct : 4 buggy : 2 malformed, roughly what a class hands in
    order = itertools.cycle(["correct", "buggy", "correct", "buggy", "malformed"] * 2)
    for i in range(count):
        kind = next(order)
        source = next(pools[kind]).read_bytes()
        name = f"student{i:04d}.py"
        # After the source: a file whose first line declares its encoding must keep it there.
        (folder / name).write_bytes(source + f"\n# generated submission {i}\n".encode())
        made[kind] += 1
    return made


def run(folder: Path, out: Path, sandbox: str, jobs: int, cold: bool) -> tuple[float, dict[str, tuple]]:
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--jobs", str(jobs),
               "--sandbox", sandbox] + (["--cold"] if cold else [])
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    with open(out / "gradebook.csv", newline="") as f:
        rows = {r["submission"]: (r["status"], r["score"], r["bugs"]) for r in csv.DictReader(f)}
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sandboxes", default="local,docker")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    try:
        folder = work / "class"
        folder.mkdir()
        made = generate(folder, args.count)
        print(f"{args.count} submissions ({', '.join(f'{n} {k}' for k, n in made.items())}), "
              f"--jobs {args.jobs}, on {shutil.which('nproc') and subprocess.getoutput('nproc')} cores", flush=True)
        print(f"{'sandbox':8} {'mode':6} {'seconds':>8} {'subs/min':>9} {'ratio':>6}  same results as naive", flush=True)
        for sandbox in args.sandboxes.split(","):
            naive_s, naive = run(folder, work / f"{sandbox}-naive", sandbox, args.jobs, cold=True)
            print(f"{sandbox:8} {'naive':6} {naive_s:8.1f} {args.count / naive_s * 60:9.1f} {1:6.2f}", flush=True)
            warm_s, warm = run(folder, work / f"{sandbox}-warm", sandbox, args.jobs, cold=False)
            differ = sorted(k for k in naive if naive[k] != warm.get(k))
            errors = sum(1 for rows in (naive, warm) for status, _, _ in rows.values() if status == "error")
            verdict = "yes" if not differ and len(warm) == len(naive) == args.count else \
                f"NO: {len(differ)} differ, e.g. " + "; ".join(f"{k}: {naive[k]} vs {warm.get(k)}" for k in differ[:3])
            print(f"{sandbox:8} {'warm':6} {warm_s:8.1f} {args.count / warm_s * 60:9.1f} {naive_s / warm_s:6.2f}  "
                  f"{verdict} ({errors} grader errors)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
