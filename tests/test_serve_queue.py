"""`grade serve --queue`: the service hands uploads to `grade worker` processes through Redis
(grader.queue). Each test module run starts its own redis-server on a free port, two workers and
the server; the results must be those of `grade FILE --json`, and a re-upload is answered from the
stored result. A missing redis-server fails them (scripts/services installs it)."""
from __future__ import annotations

import pytest

from tests.conftest import SUBMISSIONS, grade
from tests.serving import QueueStack, Server, new_token, summary

FILES = [SUBMISSIONS / "correct" / "einsum.py", SUBMISSIONS / "buggy" / "padding_inverted__manual.py"]


@pytest.fixture(scope="module")
def queue_server(tmp_path_factory):
    """redis-server, two `grade worker`s and `grade serve --queue`, all of this module's own."""
    folder = tmp_path_factory.mktemp("serve-queue")
    stack = QueueStack(folder, workers=2, slots=1)
    try:
        tokens = folder / "tokens.json"
        token = new_token(tokens, "queue")
        server = Server(folder, "--queue", stack.broker, "--tokens", str(tokens))
        try:
            yield server, token
        finally:
            server.stop()
    finally:
        stack.stop()


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
