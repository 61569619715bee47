"""`grade serve --queue`: the service hands uploads to `grade worker` processes through Redis
(grader.queue). Each test module run starts its own redis-server on a free port, two workers and
the server; the results must be those of `grade FILE --json`, and a re-upload is answered from the
stored result. Skipped where grader.queue or redis-server is missing."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("grader.queue")

from tests.conftest import ROOT, SUBMISSIONS, grade  # noqa: E402
from tests.serving import Server, free_port, new_token, summary  # noqa: E402

REDIS_SERVER = shutil.which("redis-server")
pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason="no redis-server: scripts/services installs it")

FILES = [SUBMISSIONS / "correct" / "einsum.py", SUBMISSIONS / "buggy" / "padding_inverted__manual.py"]


def _until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def queue_server(tmp_path_factory):
    """redis-server, two `grade worker`s and `grade serve --queue`, all of this module's own."""
    import redis
    folder = tmp_path_factory.mktemp("serve-queue")
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    config = [str(ROOT / "deploy" / "redis.conf")] if (ROOT / "deploy" / "redis.conf").exists() else []
    procs = [subprocess.Popen([REDIS_SERVER, *config, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                               "--daemonize", "no"], stdout=open(folder / "redis.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)]
    server = None
    try:
        client = redis.Redis(port=port, socket_timeout=5)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False
        _until(answers, 30, "redis-server")
        for n in (1, 2):
            log = folder / f"worker{n}.log"
            procs.append(subprocess.Popen([sys.executable, "-m", "grader", "worker", "--broker", broker, "--slots", "1",
                                           "--name", f"serve{n}@test"], stdout=open(log, "w"),
                                          stderr=subprocess.STDOUT, start_new_session=True))
            _until(lambda: "ready." in log.read_text(), 120, f"worker {n}")
        tokens = folder / "tokens.json"
        token = new_token(tokens, "queue")
        server = Server(folder, "--queue", broker, "--tokens", str(tokens))
        yield server, token
    finally:
        if server is not None:
            server.stop()
        for proc in reversed(procs):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_queue_mode_gives_the_result_of_grade_file(queue_server, path):
    server, token = queue_server
    answer = server.upload(token, path.read_bytes(), path.name)
    assert answer.status_code == 202 and answer.json()["state"] == "queued", answer.text
    document = server.wait(token, answer.json()["url"])
    assert document["state"] == "done"
    assert summary(document["result"]) == summary(grade(path).result)


def test_queue_mode_reupload_is_answered_from_the_stored_result(queue_server):
    server, token = queue_server
    data = FILES[1].read_bytes() + b"\n# queue re-upload\n"
    first = server.grade(token, data, "again.py")
    again = server.upload(token, data, "again.py")
    assert again.status_code == 200 and again.json()["result"] == first["result"]
