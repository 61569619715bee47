"""The CPU a warm batch costs, this checkout against another one (a baseline), on the same class.

    .venv/bin/python bench/batch_cpu.py --baseline /path/to/other/checkout [--count 8] [--rounds 3]
                                        [--cold] [--sandbox local|docker]

Copies COUNT files of the project's corpus (correct styles and typical mistakes, each made unique by
a comment) into a class, then grades it with `grade batch --jobs 2 --force` (with --cold: a cold
grade per submission, as `grade FILE` gives) ROUNDS times with each
checkout in turn (the baseline's code first on PYTHONPATH). For each run it prints the wall time and
the CPU seconds of the whole process tree: its warm servers, their zygotes and workers, the
harnesses, counted by a cpuacct cgroup made for the run (cgroup v1, as root; elsewhere the CPU of
the processes the batch waited for, which misses a zygote killed with its sandbox). With --sandbox
docker the containers run in Docker's cgroups: only the host's side is counted. At the end,
each checkout's median and their ratio. The scores of the two must agree, or it says so.
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "submissions"


def make_class(folder: Path, count: int) -> None:
    files = sorted((CORPUS / "correct").glob("*.py"))[:count // 2] + sorted((CORPUS / "buggy").glob("*.py"))[:count - count // 2]
    for i, path in enumerate(files):
        (folder / f"s{i:03d}.py").write_text(f"# student {i}\n" + path.read_text())


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def run(code: Path, klass: Path, out: Path, options: list[str]) -> tuple[float, float, dict]:
    env = dict(os.environ)
    if code != ROOT:
        env["PYTHONPATH"] = str(code)
    shutil.rmtree(out, ignore_errors=True)
    group = CPUACCT / f"batch-cpu-{os.getpid()}-{os.urandom(3).hex()}"
    try:
        group.mkdir()
    except OSError:
        group = None

    def enter() -> None:
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "grader", "batch", str(klass), "--out", str(out), "--jobs", "2", "--force", *options],
                   env=env, cwd=klass.parent, check=True, capture_output=True, preexec_fn=enter)
    wall = time.monotonic() - started
    if group is not None:
        time.sleep(0.5)  # what the batch killed as it ended is gone by now
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        group.rmdir()
    else:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(out / "gradebook.csv") as f:
        scores = {row["submission"]: row["score"] for row in csv.DictReader(f)}
    return wall, cpu, scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, type=Path, help="another checkout of the project")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="a cold grade per submission")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    args = parser.parse_args()
    options = ["--sandbox", args.sandbox] + (["--cold"] if args.cold else [])
    with tempfile.TemporaryDirectory(prefix="batch-cpu-") as tmp:
        klass = Path(tmp) / "class"
        klass.mkdir()
        make_class(klass, args.count)
        results: dict[str, list[tuple[float, float]]] = {"baseline": [], "this checkout": []}
        scores = {}
        for r in range(args.rounds):
            for name, code in (("baseline", args.baseline.resolve()), ("this checkout", ROOT)):
                wall, cpu, scores[name] = run(code, klass, Path(tmp) / "out", options)
                results[name].append((wall, cpu))
                print(f"round {r + 1}  {name:14s} wall {wall:6.1f} s   CPU {cpu:6.1f} s", flush=True)
        med = {name: sorted(c for _, c in runs)[len(runs) // 2] for name, runs in results.items()}
        walls = {name: sorted(w for w, _ in runs)[len(runs) // 2] for name, runs in results.items()}
        print(f"\n{args.count} submissions, --jobs 2 {' '.join(options)}, median of {args.rounds}:")
        for name in results:
            print(f"  {name:14s} wall {walls[name]:6.1f} s   CPU {med[name]:6.1f} s")
        print(f"  CPU ratio (this / baseline): {med['this checkout'] / med['baseline']:.2f}")
        if scores["baseline"] != scores["this checkout"]:
            print("  the scores differ:", {k: (scores['baseline'].get(k), v) for k, v in scores["this checkout"].items()
                                           if scores["baseline"].get(k) != v})
            return 1
        print("  every score the same both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
