"""Queue grading speed: the same class through one worker and through two, and how long an
interactive upload waits while a regrade runs.

    .venv/bin/python bench/queue_speed.py [--count 40] [--rounds 2] [--backlog 1000]

Starts its own redis-server on a free port of 127.0.0.1 (with deploy/redis.conf) and its own
`grade worker` processes (one slot each, local sandbox). Generates COUNT submissions as
bench/batch_speed.py does, then in one run:
1. `grade batch --queue` with one worker, then with two, alternated for ROUNDS rounds (fresh
   workers and an empty store each time); the median submissions per minute and the ratio;
2. with two warm, idle workers, one interactive upload (a correct file): its time from submit to
   result; then the same while a regrade of the class keeps both workers busy, and how many of the
   regrade's results were in by then (a single queue would make it wait for all of them);
3. BACKLOG more regrade tasks queued at once (distinct copies of a correct file, sent with
   queue.submit on the regrade lane), then one interactive upload: its time to result.
"""
from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from batch_speed import generate  # noqa: E402  (the class bench/batch_speed.py grades)

from grader import queue  # noqa: E402
from tests.test_queue import RedisServer, Workers, _env  # noqa: E402  (the tests' own redis and workers)


def batch(folder: Path, out: Path, url: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), "--queue", url,
                             *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())


def timed_batch(folder: Path, out: Path, url: str) -> tuple[float, dict]:
    started = time.monotonic()
    proc = batch(folder, out, url)
    if proc.wait() not in (0, 1):
        sys.exit(f"grade batch --queue failed ({proc.returncode})")
    seconds = time.monotonic() - started
    with open(out / "gradebook.csv", newline="") as f:
        return seconds, {r["submission"]: (r["status"], r["score"], r["bugs"]) for r in csv.DictReader(f)}


def upload_wait(url: str, tag: str) -> float:
    """Seconds from submit to result of one correct upload (unique bytes, so it is really graded)."""
    data = (ROOT / "examples" / "correct.py").read_bytes() + f"\n# upload {tag}\n".encode()
    started = time.monotonic()
    gid = queue.submit(url, data, "correct.py")
    if queue.result(url, gid, timeout=600)["score"] != 100:
        sys.exit("the interactive upload did not get full marks")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2, help="1-worker and 2-worker runs, alternated (at most 7)")
    parser.add_argument("--backlog", type=int, default=1000, help="regrade tasks queued before the last upload")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="queue-bench-"))
    folder = work / "class"
    folder.mkdir()
    made = generate(folder, args.count)
    server = RedisServer(work / "redis")
    pools: list[Workers] = []
    try:
        print(f"{args.count} submissions ({', '.join(f'{n} {k}' for k, n in made.items())}), one slot per worker, "
              f"{args.rounds} round(s) alternated, on {subprocess.getoutput('nproc')} cores", flush=True)
        seconds: dict[int, list[float]] = {1: [], 2: []}
        rows: dict[int, dict] = {}
        db = 0
        for _round in range(args.rounds):
            for count in (1, 2):
                url = f"redis://:{server.password}@127.0.0.1:{server.port}/{db}"  # a store of its own: everything is graded
                pool = Workers(url, work)
                pools.append(pool)
                for i in range(count):
                    pool.start(f"db{db}w{i}")
                took, rows[count] = timed_batch(folder, work / f"out-{db}", url)
                seconds[count].append(took)
                print(f"  round {_round + 1}: {count} worker(s) {took:6.1f} s", flush=True)
                pool.kill_all()
                db += 1
        print(f"{'workers':8} {'median s':>8} {'subs/min':>9} {'ratio':>6}  same results", flush=True)
        one = statistics.median(seconds[1])
        for count in (1, 2):
            median = statistics.median(seconds[count])
            same = "" if count == 1 else ("yes" if rows[2] == rows[1] else "NO")
            print(f"{count:<8} {median:8.1f} {args.count / median * 60:9.1f} {one / median:6.2f}  {same}", flush=True)

        url = f"redis://:{server.password}@127.0.0.1:{server.port}/{db}"
        pool = Workers(url, work)
        pools.append(pool)
        for i in range(2):
            pool.start(f"db{db}w{i}")
        timed_batch(folder, work / "out-warm", url)  # both workers warm
        idle = upload_wait(url, "idle")
        regrade = batch(folder, work / "out-busy", url, "--force")  # graded again, not answered from the store
        # Once the regrade recorded its first result, its tasks are queued and both workers busy.
        while not (work / "out-busy" / "index.json").exists() and regrade.poll() is None:
            time.sleep(0.1)
        busy = upload_wait(url, "busy")
        graded = len(json.loads((work / "out-busy" / "index.json").read_text())["submissions"])
        regrade.wait()
        print(f"interactive upload, idle workers:          {idle:6.1f} s from submit to result", flush=True)
        print(f"interactive upload, while a regrade runs:  {busy:6.1f} s (the regrade had recorded {graded} of its "
              f"{args.count} results by then)", flush=True)
        base = (ROOT / "examples" / "correct.py").read_bytes()
        started = time.monotonic()
        for n in range(args.backlog):
            queue.submit(url, base + f"\n# backlog {n}\n".encode(), f"backlog{n}.py", lane="regrade")
        queued_s = time.monotonic() - started
        behind = upload_wait(url, "behind the backlog")
        print(f"interactive upload, {args.backlog} regrade tasks queued: {behind:6.1f} s (queueing them took "
              f"{queued_s:.1f} s)", flush=True)
    finally:
        for pool in pools:
            pool.kill_all()
        server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
