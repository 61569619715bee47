"""Benchmark: wall time of grading one correct submission, per sandbox, beside the time of
`python -c "import torch"` measured in the same run (the floor any PyTorch grader pays once).

    .venv/bin/python bench/grade_time.py [--runs 7] [--sandboxes local,docker] [--baseline CHECKOUT] [SUBMISSION ...]

Runs alternate (torch import, local grade, docker grade, torch import, ...) so machine noise hits
every command alike. `--baseline` also times the local grade of another checkout of the project
(a `git worktree` of an earlier commit; run in it, with its .venv if it has one, else this one) in
the same rotation: a before / after comparison in one run. Each line gives the median wall time,
the median CPU time (user + system of the command and the children it waits for), which a busy
machine disturbs less, both as a ratio to the torch import's, and the machine's busy CPU time
meanwhile (it also counts the processes a grade does not wait for, a zygote's workers: read it on
a quiet machine). The submissions are `examples/correct.py` and a buggy one whose diagnosis
runs (`examples/mask_after_softmax.py`) unless named. After the totals, each grade's phases (the
result's `phases`, what `grade --profile` prints): the median time of each, also as a ratio to the
import. The docker sandbox needs the engine and the image (scripts/test sets both up).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def timed(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of the command and its children, CPU seconds the whole machine
    spent meanwhile). The second misses the processes a grade does not wait for itself (a
    zygote's workers): the third counts them, and anything else running, so it is the one to read
    on a quiet machine."""
    before, busy = os.times(), machine_busy_s()
    started = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    elapsed = time.perf_counter() - started
    after, machine = os.times(), machine_busy_s() - busy
    if proc.returncode not in (0, 1):  # 1: graded, below full marks (the buggy submission)
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed, (after.children_user - before.children_user) + (after.children_system - before.children_system), machine


def phases_of(path: Path) -> dict[str, float]:
    """How long each phase of the grade whose result JSON is at `path` took (none if it has none)."""
    try:
        spans = json.loads(path.read_text()).get("phases") or []
    except (OSError, ValueError):
        return {}
    took: dict[str, float] = {}
    for span in spans:
        took[span["name"]] = took.get(span["name"], 0.0) + span["end_s"] - span["start_s"]
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="*", default=[str(ROOT / "examples" / "correct.py"),
                                                            str(ROOT / "examples" / "mask_after_softmax.py")])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sandboxes", default="local", help="comma-separated: local,docker")
    parser.add_argument("--baseline", help="another checkout of the project, with its own .venv, timed too")
    args = parser.parse_args()
    results = Path(tempfile.mkdtemp(prefix="grade-time-"))
    commands = {'python -c "import torch"': ([sys.executable, "-c", "import torch"], None, ROOT)}
    for submission in args.submissions:
        name = Path(submission).name
        for sandbox in args.sandboxes.split(","):
            out = results / f"{name}-{sandbox}.json"
            commands[f"{name} --sandbox {sandbox}"] = ([sys.executable, "-m", "grader", submission, "--quiet",
                                                        "--sandbox", sandbox, "--json", str(out)], out, ROOT)
        if args.baseline:
            # Run in the other checkout, whose code `-m grader` then imports first (and the harness
            # after it: the sandbox passes the grade's import path on), with its own .venv if it has one.
            other = Path(args.baseline).resolve()
            python = other / ".venv" / "bin" / "python"
            commands[f"baseline {name} --sandbox local"] = (
                [str(python if python.exists() else sys.executable), "-m", "grader",
                 str(Path(submission).resolve()), "--quiet", "--sandbox", "local"], None, other)
    times: dict[str, list[tuple[float, float, float]]] = {label: [] for label in commands}
    phases: dict[str, list[dict[str, float]]] = {label: [] for label in commands}
    for cmd, _, cwd in commands.values():
        timed(cmd, cwd)  # warm the page cache (and the engine) before measuring
    for _ in range(args.runs):
        for label, (cmd, out, cwd) in commands.items():
            times[label].append(timed(cmd, cwd))
            if out is not None:
                phases[label].append(phases_of(out))
    print(f"runs: {args.runs} each, alternating; submissions: {', '.join(args.submissions)}"
          + (f"; baseline: {args.baseline}" if args.baseline else ""))
    import_wall = statistics.median(w for w, _, _ in times['python -c "import torch"'])
    import_cpu = statistics.median(c for _, c, _ in times['python -c "import torch"'])
    for label, runs in times.items():
        walls, cpus, machine = [w for w, _, _ in runs], [c for _, c, _ in runs], [m for _, _, m in runs]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        print(f"{label:<44} wall median {wall:6.2f} s (min {min(walls):.2f}, max {max(walls):.2f}) "
              f"{wall / import_wall:5.2f}x   cpu median {cpu:6.2f} s {cpu / import_cpu:5.2f}x   "
              f"machine cpu median {statistics.median(machine):6.2f} s   (x: the torch import's)")
    for label, runs in phases.items():
        if not runs or not any(runs):
            continue
        print(f"\nphases of {label} (median over {len(runs)} runs; x: the torch import's wall time)")
        for name in dict.fromkeys(n for run in runs for n in run):
            took = statistics.median(run.get(name, 0.0) for run in runs)
            print(f"  {name:<40} {took:6.2f} s {took / import_wall:5.2f}x")


if __name__ == "__main__":
    main()
