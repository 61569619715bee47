"""The deployment recipe, run for real on this machine: `deploy/stack.py up` starts Redis,
PostgreSQL, two `grade worker`s (Docker sandbox) and `grade serve` as containers of the test's own
stack (its own name, state folder and port), a token is made while it runs, a correct and a buggy
file are graded through the HTTP API, and `down --volumes` leaves no container, network or volume
of the stack behind."""
from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.grading import SUBMISSIONS
from tests.support.queueing import free_port
from tests.support.serving import new_token

pytestmark = pytest.mark.docker   # the stack's containers: the grader image and grader-services

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "deploy" / "stack.py"


def _stack(name: str, state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(STACK), "--name", name, "--state", str(state), *args],
                          capture_output=True, text=True, timeout=timeout)


def _leftovers(name: str) -> list[str]:
    found = []
    for kind in ("ps -a", "network ls", "volume ls"):
        listed = subprocess.run(["docker", *kind.split(), "-q", "--filter", f"label=attention-grader.stack={name}"],
                                capture_output=True, text=True, timeout=60)
        found += [f"{kind.split()[0]} {line}" for line in listed.stdout.split()]
    return found


@pytest.fixture
def stack(tmp_path):
    name, state, port = f"grader-test-{secrets.token_hex(3)}", tmp_path / "state", free_port()
    started = _stack(name, state, "up", "--workers", "2", "--port", str(port), timeout=900)
    try:
        assert started.returncode == 0, started.stdout + started.stderr + _logs(name)
        yield name, state, port
    finally:
        down = _stack(name, state, "down", "--volumes", timeout=300)
        assert down.returncode == 0, down.stderr
        assert _leftovers(name) == [], _leftovers(name)


def _logs(name: str) -> str:
    out = []
    for role in ("service", "worker1", "redis", "postgres"):
        logs = subprocess.run(["docker", "logs", "--tail", "30", f"{name}-{role}"], capture_output=True, text=True,
                              timeout=60)
        out.append(f"--- {role}\n{logs.stdout}{logs.stderr}")
    return "\n".join(out)


def test_the_deployment_recipe_starts_grades_and_goes(stack):
    import httpx
    name, state, port = stack
    base = f"http://127.0.0.1:{port}"
    health = httpx.get(f"{base}/healthz", timeout=10).json()
    assert (health["status"], health["database"], health["queue"], health["workers"], health["warm_slots"]) == \
        ("ok", "ok", "ok", 2, 2), health
    token = new_token(state / "tokens.json", "course")  # made while the service runs: no restart
    headers = token.headers
    files = {"correct": SUBMISSIONS / "correct" / "einsum.py",
             "buggy": SUBMISSIONS / "buggy" / "mask_after_softmax__loop.py"}
    urls = {}
    for kind, path in files.items():
        answer = httpx.post(f"{base}/v1/grades", headers=headers, files={"file": (path.name, path.read_bytes())},
                            timeout=60)
        assert answer.status_code == 202, answer.text + _logs(name)
        urls[kind] = answer.json()["url"]
    results = {}
    deadline = time.monotonic() + 300
    while len(results) < len(urls):
        for kind, url in urls.items():
            document = httpx.get(base + url, headers=headers, timeout=30).json()
            if document["state"] in ("done", "failed"):
                results[kind] = document["result"]
        assert time.monotonic() < deadline, f"not graded in 300 s: {results}\n{_logs(name)}"
        time.sleep(1)
    correct, buggy = results["correct"], results["buggy"]
    assert correct["score"] == correct["max_score"] == 100, json.dumps(correct)[:2000]
    assert correct["environment"]["sandbox"] == "docker" and buggy["environment"]["sandbox"] == "docker"
    assert "mask_after_softmax" in [b["id"] for b in buggy["bugs"]], json.dumps(buggy)[:2000]
    # The grades are in the stack's PostgreSQL: a platform catches up with ?since=.
    listed = httpx.get(f"{base}/v1/grades?since=0", headers=headers, timeout=30).json()
    assert len(listed["grades"]) == 2
