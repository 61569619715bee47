"""Batch grading speed: the naive way against warm sandboxes, on the same generated class.

    .venv/bin/python bench/batch_speed.py [--count 200] [--jobs 2] [--sandboxes local,docker]

Generates COUNT submissions from the project's own corpus (correct styles, the typical mistakes and
malformed uploads, in turn; each copy made unique by a comment, so no two share a content hash), then
grades the whole class with `grade batch` four ways in one run: per sandbox, `--cold` (the naive way:
a fresh sandbox and a cold start, imports and all, per submission) and warm (the default). Every run
starts from an empty output folder. Prints submissions per minute for each, the warm/naive ratio,
the most memory a slot held (the batch's peak, sampled twice a second, over --jobs: the PSS of its
process tree, shared pages counted once, plus the memory charged to its containers), and whether
every submission got the same status, score and bugs both ways.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
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


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(parent, []).append(int(entry))
    return tree


def _pss_kib(pid: int) -> int:
    """The proportional set size of one process: shared pages (a fork's torch) counted once in all."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration, ValueError):
        return 0


def memory_now(root: int, owner: str) -> int:
    """Bytes held by the batch's processes now: the PSS of `root` and every process below it, and
    the memory charged to each container the batch started (labelled with `owner`; their processes
    are the engine's children, not the batch's)."""
    tree, total, pending = _children(), 0, [root]
    while pending:
        pid = pending.pop()
        total += _pss_kib(pid) << 10
        pending.extend(tree.get(pid, []))
    if owner:
        for line in subprocess.run(["docker", "ps", "-q", "--filter", f"label=attention-grader.owner={owner}"],
                                   capture_output=True, text=True).stdout.split():
            pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", line], capture_output=True,
                                 text=True).stdout.strip()
            total += _cgroup_memory(pid)
    return total


def _cgroup_memory(pid: str) -> int:
    """The memory charged to the cgroup of process `pid` (a container's): cgroup v2's memory.current,
    or v1's memory.usage_in_bytes; 0 when neither can be read."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = [line.strip().split(":", 2) for line in f if line.strip()]
        for _, controllers, path in lines:
            if "memory" in controllers.split(","):
                with open(f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes") as f:
                    return int(f.read())
        path = next(path for hierarchy, controllers, path in lines if hierarchy == "0" and not controllers)
        with open(f"/sys/fs/cgroup{path}/memory.current") as f:
            return int(f.read())
    except (OSError, ValueError, StopIteration):
        return 0


def run(folder: Path, out: Path, sandbox: str, jobs: int, cold: bool) -> tuple[float, dict[str, tuple], int]:
    """(seconds, the gradebook's rows, the most memory the batch held at once, sampled)."""
    command = [sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--jobs", str(jobs),
               "--sandbox", sandbox] + (["--cold"] if cold else [])
    owner = f"batch-bench-{os.getpid()}-{out.name}"
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "GRADER_OWNER": owner})
    peak, done = [0], threading.Event()

    def sample():
        while not done.wait(0.5):
            peak[0] = max(peak[0], memory_now(proc.pid, owner if sandbox == "docker" else ""))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    done.set()
    sampler.join()
    seconds = time.monotonic() - started
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({proc.returncode}):\n{stdout}\n{stderr}")
    with open(out / "gradebook.csv", newline="") as f:
        rows = {r["submission"]: (r["status"], r["score"], r["bugs"]) for r in csv.DictReader(f)}
    return seconds, rows, peak[0]


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
        print(f"{'sandbox':8} {'mode':6} {'seconds':>8} {'subs/min':>9} {'ratio':>6} {'MiB/slot':>9}  "
              "same results as naive", flush=True)
        for sandbox in args.sandboxes.split(","):
            naive_s, naive, naive_mem = run(folder, work / f"{sandbox}-naive", sandbox, args.jobs, cold=True)
            print(f"{sandbox:8} {'naive':6} {naive_s:8.1f} {args.count / naive_s * 60:9.1f} {1:6.2f} "
                  f"{naive_mem / args.jobs / 2**20:9.0f}", flush=True)
            warm_s, warm, warm_mem = run(folder, work / f"{sandbox}-warm", sandbox, args.jobs, cold=False)
            differ = sorted(k for k in naive if naive[k] != warm.get(k))
            errors = sum(1 for rows in (naive, warm) for status, _, _ in rows.values() if status == "error")
            verdict = "yes" if not differ and len(warm) == len(naive) == args.count else \
                f"NO: {len(differ)} differ, e.g. " + "; ".join(f"{k}: {naive[k]} vs {warm.get(k)}" for k in differ[:3])
            print(f"{sandbox:8} {'warm':6} {warm_s:8.1f} {args.count / warm_s * 60:9.1f} {naive_s / warm_s:6.2f} "
                  f"{warm_mem / args.jobs / 2**20:9.0f}  "
                  f"{verdict} ({errors} grader errors)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
