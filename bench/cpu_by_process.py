"""Where a command's CPU time goes, by the kind of process that spent it: every process on the
machine is sampled once a second while COMMAND runs (its CPU time from /proc/PID/stat), and each
one's growth is added to the kind its command line names (a student's worker and its zygote, a warm
server, a cold grade's harness, pytest, Docker's daemons, ...).

    python bench/cpu_by_process.py [--json OUT] -- COMMAND ...
    python bench/cpu_by_process.py -- scripts/test          # the whole suite

Prints a table of CPU seconds per kind and its share of what the machine's cores could have given
over the same wall time. A process that lives less than a second between two samples is missed,
and one is counted up to its last sample: the table is a floor, and it says how much it caught.
Everything on the machine counts, the command's or not (other work shows as its own kinds).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = [  # (kind, pattern of the command line), first match wins
    ("student worker / zygote", r"sandbox\.zygote|sandbox\.worker"),
    ("warm server (a batch's grades)", r"sandbox\.warm_server"),
    ("cold harness (grade FILE)", r"sandbox\.harness"),
    ("container entry", r"sandbox\.container"),
    ("grade batch", r"grader batch|grade batch"),
    ("queue worker", r"grader worker|grade worker|celery"),
    ("service", r"grader serve|grade serve|uvicorn"),
    ("grade (CLI)", r"-m grader|bin/grade"),
    ("pytest", r"pytest|xdist|execnet"),
    ("dockerd", r"dockerd"), ("containerd", r"containerd"), ("runc, docker-proxy", r"runc|docker-init|docker-proxy"),
    ("redis", r"redis-server"), ("postgres", r"postgres"), ("chromium", r"chrom"),
    ("pip, setup.sh", r"pip |setup\.sh|wheel"),
    ("other python", r"python"),
]


STUDENT_UIDS = range(2_000_000_000, 2_100_000_000)  # sandbox.confine's uids drawn for a grade (the image)
_OWN_PID_NS = os.readlink("/proc/self/ns/pid")


def _kind(pid: str, stat: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmd = ""
    if re.search(r"sandbox\.(harness|warm_server|container)", cmd) and _students(pid):
        return KINDS[0][0]  # a zygote forked from its harness or server, and its workers
    return next((kind for kind, pattern in KINDS if re.search(pattern, cmd)),
                "other: " + stat.split("(", 1)[1].rsplit(")", 1)[0])


def _students(pid: str) -> bool:
    """Whether `pid` is a student's zygote or worker that carries its parent's command line: in a
    PID namespace of the grade's own (the local sandbox), or of a uid drawn for a grade (the image)."""
    try:
        if os.stat(f"/proc/{pid}").st_uid in STUDENT_UIDS:
            return True
        return ("container" not in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
                and os.readlink(f"/proc/{pid}/ns/pid") != _OWN_PID_NS)
    except OSError:
        return False


def sample(seen: dict, totals: dict, first: bool) -> None:
    """One look at every process: what each spent since the last look goes to its kind."""
    alive = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            fields = stat.rsplit(")", 1)[1].split()
            cpu, key = (int(fields[11]) + int(fields[12])) / TICK, (pid, fields[19])  # utime+stime; start time
        except (OSError, IndexError, ValueError):
            continue
        if key not in seen:  # what a process spent before the first look is not the command's
            seen[key] = [_kind(pid, stat), cpu if first else 0.0]
        kind, before = seen[key]
        totals[kind] = totals.get(kind, 0.0) + cpu - before
        seen[key][1] = cpu
        alive.add(key)
    for key in [k for k in seen if k not in alive]:
        del seen[key]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the totals to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run (after --)")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    seen: dict = {}
    totals: dict[str, float] = {}
    sample(seen, totals, first=True)
    started = time.monotonic()
    process = subprocess.Popen(command)
    while process.poll() is None:
        time.sleep(1)
        sample(seen, totals, first=False)
    wall = time.monotonic() - started
    caught, cores = sum(totals.values()), os.cpu_count() or 1
    print(f"\n{' '.join(command)}: exit {process.returncode}, {wall:.0f} s of wall time on {cores} cores "
          f"({wall * cores:.0f} core-seconds); the samples caught {caught:.0f} CPU seconds "
          f"({100 * caught / (wall * cores):.0f}%)", file=sys.stderr)
    for kind, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        if seconds >= max(1.0, caught / 500):
            print(f"  {seconds:8.0f} s  {100 * seconds / caught:5.1f}%  {kind}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "wall_s": wall, "cores": cores, "cpu_s": totals}, f, indent=1)
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
