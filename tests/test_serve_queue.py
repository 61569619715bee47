"""`grade serve --queue`: the service hands uploads to `grade worker` processes through Redis
(grader.queue). Each test module run starts its own redis-server on a free port, two workers and
the server; the results must be those of `grade FILE --json`, and a re-upload is answered from the
stored result. A missing redis-server fails them (scripts/services installs it)."""
from __future__ import annotations

import pytest

from tests.support.corpus import graded_in_corpus
from tests.support.grading import SUBMISSIONS
from tests.support.queueing import until
from tests.support.serving import QueueStack, Server, new_token, summary

# In their corpora's first chunks (tests.support.corpus), as test_serve.py's are.
FILES = [SUBMISSIONS / "correct" / "einsum.py", SUBMISSIONS / "buggy" / "causal_mask_off_by_one__includes_next.py"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """redis-server and two `grade worker`s (local sandbox), this module's own."""
    stack = QueueStack(tmp_path_factory.mktemp("serve-queue"), workers=2, slots=1)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def queue_server(stack, tmp_path_factory):
    """`grade serve --queue` on the module's stack."""
    folder = tmp_path_factory.mktemp("serve")
    tokens = folder / "tokens.json"
    token = new_token(tokens, "queue")
    server = Server(folder, "--queue", stack.broker, "--tokens", str(tokens))
    try:
        yield server, token
    finally:
        server.stop()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_queue_mode_gives_the_result_of_a_batch(queue_server, path):
    server, token = queue_server
    answer = server.upload(token, path.read_bytes(), path.name)
    assert answer.status_code == 202 and answer.json()["state"] == "queued", answer.text
    document = server.wait(token, answer.json()["url"])
    assert document["state"] == "done"
    assert summary(document["result"]) == summary(graded_in_corpus(path))


def test_queue_mode_reupload_is_answered_from_the_stored_result(queue_server):
    server, token = queue_server
    data = FILES[1].read_bytes() + b"\n# queue re-upload\n"
    first = server.grade(token, data, "again.py")
    again = server.upload(token, data, "again.py")
    assert again.status_code == 200 and again.json()["result"] == first["result"]


def test_a_service_started_with_a_sandbox_gets_it_or_an_error_never_another(stack, tmp_path):
    # The workers grade in the local sandbox; a service started with --sandbox docker asks for Docker,
    # and a client's form field naming a sandbox changes nothing (the API has none).
    tokens = tmp_path / "tokens.json"
    token = new_token(tokens, "docker")
    server = Server(tmp_path, "--queue", stack.broker, "--sandbox", "docker", "--tokens", str(tokens))
    try:
        document = server.grade(token, FILES[0].read_bytes(), "asks-docker.py", sandbox="local")
    finally:
        server.stop()
    assert document["state"] == "failed" and document["result"]["score"] is None, document
    assert ("refused: this worker grades in the local sandbox its operator started it with, and the task asked "
            "for the docker sandbox") in document["result"]["message"]


def test_a_result_forged_in_redis_is_a_failed_grade_on_the_service(queue_server, stack):
    import json

    from grader import queue
    server, token = queue_server
    data = FILES[1].read_bytes() + b"\n# forged in redis\n"
    gid = queue.grade_id(data, "forged.py")  # what the service asks its workers for: no sandbox named
    forged = {"id": gid, "sha256": "", "sandbox": "local", "sig": "0" * 64,
              "result": {**graded_in_corpus(FILES[0]), "score": 100}}
    stack.redis.client.set(f"grader:result:{gid}", json.dumps(forged))
    document = server.grade(token, data, "forged.py")
    assert document["state"] == "failed" and document["result"]["score"] is None, document
    assert "signature did not verify" in document["result"]["message"], document["result"]["message"]
    assert stack.redis.client.get(f"grader:result:{gid}") is None  # dropped: an upload again grades it
    again = server.grade(token, data, "forged.py")
    assert again["state"] == "done" and summary(again["result"]) == summary(graded_in_corpus(FILES[1]))


def test_health_tells_the_truth_and_uploads_fail_fast_when_the_queue_goes(tmp_path):
    """A stack of this test's own: /healthz counts the workers and their warm slots (a worker says
    ready only once its slots are warm); with its only worker killed it answers 503 and says no
    worker is seen; with Redis killed it answers 503, and an upload, from the API or the page, is
    refused within seconds with a message a student can act on, not the connection's error."""
    import time

    import httpx

    (tmp_path / "stack").mkdir()
    own = QueueStack(tmp_path / "stack", workers=1, slots=1)
    tokens = tmp_path / "tokens.json"
    token = new_token(tokens, "health")
    server = Server(tmp_path, "--queue", own.broker, "--tokens", str(tokens))
    try:
        log = own.workers.log("serve1")
        assert "serve1@test ready: 1 warm local slot(s)" in log and "serve1@test ready." not in log, log[-2000:]
        health = server.client.get("/healthz").json()
        assert (health["status"], health["queue"], health["workers"], health["warm_slots"]) == ("ok", "ok", 1, 1), health

        own.workers.kill("serve1")
        answer = until(lambda: (seen := server.client.get("/healthz")).status_code != 200 and seen, 30,
                       "/healthz to stop answering 200 once the worker's heartbeat is gone")
        assert answer.status_code == 503 and "no worker" in answer.json()["problems"][0], answer.text

        own.redis.kill()
        answer = server.client.get("/healthz", timeout=15)
        assert answer.status_code == 503 and answer.json()["problems"] == ["the grading queue does not answer"], answer.text
        started = time.monotonic()
        refused = server.upload(token, FILES[0].read_bytes() + b"\n# queue down\n", "down.py")
        api_s = time.monotonic() - started
        assert refused.status_code == 503 and "try again in a few minutes" in refused.json()["detail"], refused.text
        started = time.monotonic()
        page = httpx.post(f"{server.url}/grades", files={"file": ("down.py", FILES[0].read_bytes() + b"\n# page\n")},
                          timeout=60)
        page_s = time.monotonic() - started
        assert page.status_code == 503 and "text/html" in page.headers["content-type"]
        assert "try again in a few minutes" in page.text and "Error 111" not in page.text and "Connection refused" not in page.text
        assert api_s < 30 and page_s < 30, (api_s, page_s)  # was 299 s: the queue client waited out an outage
    finally:
        server.stop()
        own.stop()
