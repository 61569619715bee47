"""Load on `grade serve`: UPLOADS distinct submissions from CLIENTS concurrent clients, each
uploading one, polling until it is finished, then taking the next.

    .venv/bin/python bench/serve_load.py [--uploads 300] [--clients 30] [--slots 2] [--modes embedded,queue]

Modes: `embedded` (the server's own warm pool of SLOTS) and `queue` (`grade serve --queue` on a
redis-server of the bench's own, with two `grade worker`s of SLOTS/2 slots each; skipped, and said
so, where grader.queue or redis-server is missing). The submissions come from the project's corpus
in turn (correct, buggy, malformed), each made unique by a comment so that no stored result answers
it. Checks that every upload ends with exactly its result (its own file name and hash, one result
per upload, none lost, none twice) and that copies of one corpus file all get the same status,
score and bugs. Prints p50 and p95 time from upload to result, and as the baseline of the same run
the time to result of one upload on the idle server.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.serving import QueueStack, Server, new_token  # noqa: E402  (the tests' way to start a server)

CORPUS = ROOT / "tests" / "submissions"
POLL_S = 0.2


def submissions(count: int) -> list[tuple[str, bytes, str]]:
    """(upload name, bytes, the corpus file it copies), 4 correct : 4 buggy : 2 malformed."""
    kinds = {kind: itertools.cycle(sorted((CORPUS / kind).glob("*.py"))) for kind in ("correct", "buggy", "malformed")}
    order = itertools.cycle(["correct", "buggy", "correct", "buggy", "malformed"])
    made = []
    for i in range(count):
        source = next(kinds[next(order)])
        made.append((f"load{i:04d}.py", source.read_bytes() + f"\n# load upload {i}\n".encode(), source.name))
    return made


async def upload_and_wait(client: httpx.AsyncClient, headers: dict, name: str, data: bytes) -> tuple[float, dict]:
    started = time.monotonic()
    answer = await client.post("/v1/grades", headers=headers, files={"file": (name, data)})
    if answer.status_code not in (200, 202):
        raise RuntimeError(f"upload {name}: {answer.status_code} {answer.text[:200]}")
    url = answer.json()["url"]
    while True:
        document = (await client.get(url, headers=headers)).json()
        if document["state"] in ("done", "failed"):
            return time.monotonic() - started, document
        await asyncio.sleep(POLL_S)


async def load(url: str, headers: dict, work: list, clients: int) -> tuple[float, list]:
    pending = list(reversed(work))
    outcomes = []

    async def client_loop(client):
        while pending:
            name, data, source = pending.pop()
            seconds, document = await upload_and_wait(client, headers, name, data)
            outcomes.append((name, data, source, seconds, document))

    started = time.monotonic()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
    return time.monotonic() - started, outcomes


def check(work: list, outcomes: list) -> list[str]:
    """What is wrong with the outcomes: lost, twice, someone else's result, copies that disagree."""
    problems = []
    ids = [o[4]["id"] for o in outcomes]
    if len(outcomes) != len(work) or len(set(ids)) != len(ids):
        problems.append(f"{len(work)} uploads, {len(outcomes)} outcomes, {len(set(ids))} distinct grade ids")
    by_source: dict[str, set] = {}
    for name, data, source, _, document in outcomes:
        result = document.get("result") or {}
        submission = result.get("submission") or {}
        if submission.get("name") != name or submission.get("sha256") != hashlib.sha256(data).hexdigest():
            problems.append(f"{name} got the result of {submission}")
        by_source.setdefault(source, set()).add((result.get("status"), result.get("score"),
                                                 tuple(sorted(b["id"] for b in result.get("bugs") or ()))))
    problems += [f"copies of {s} graded differently: {v}" for s, v in by_source.items() if len(v) > 1]
    return problems


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run_mode(mode: str, args, folder: Path) -> None:
    tokens = folder / "tokens.json"
    token = new_token(tokens, f"bench-{mode}")
    headers = token.headers
    stop = []
    try:
        if mode == "queue":
            stack = QueueStack(folder, workers=2, slots=max(1, args.slots // 2))
            stop.append(stack.stop)
            server = Server(folder, "--queue", stack.broker, "--tokens", str(tokens), "--rate-limit", "1000000")
        else:
            server = Server(folder, "--slots", str(args.slots), "--tokens", str(tokens), "--rate-limit", "1000000")
        stop.append(server.stop)
        work = submissions(args.uploads + 1)
        idle_s, _ = asyncio.run(load(server.url, headers, work[:1], 1))  # the baseline (also warms a slot)
        work = work[1:]
        wall, outcomes = asyncio.run(load(server.url, headers, work, args.clients))
        times = [o[3] for o in outcomes]
        states = {s: sum(o[4]["state"] == s for o in outcomes) for s in ("done", "failed")}
        problems = check(work, outcomes)
        print(f"{mode:9} {len(work)} uploads, {args.clients} clients: {wall:.1f} s, "
              f"{len(work) / wall * 60:.0f} grades/min · time to result p50 {percentile(times, 50):.1f} s, "
              f"p95 {percentile(times, 95):.1f} s, max {max(times):.1f} s · idle server: {idle_s:.1f} s · "
              f"{states['done']} done, {states['failed']} failed", flush=True)
        print(f"{'':9} every upload has exactly its result" if not problems else
              f"{'':9} PROBLEMS:\n" + "\n".join(problems[:20]), flush=True)
    finally:
        for fn in reversed(stop):
            fn()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, default=300)
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--slots", type=int, default=2, help="embedded: the pool's slots; queue: shared by 2 workers")
    parser.add_argument("--modes", default="embedded,queue")
    args = parser.parse_args()
    for mode in args.modes.split(","):
        if mode == "queue":
            try:
                import grader.queue  # noqa: F401
            except ImportError:
                print("queue     skipped: grader.queue is not in this checkout (the queue's branch is not merged)")
                continue
            if shutil.which("redis-server") is None:
                print("queue     skipped: no redis-server (scripts/services installs it)")
                continue
        with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
            run_mode(mode, args, Path(folder))


if __name__ == "__main__":
    main()
