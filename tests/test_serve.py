"""`grade serve`, the real server process on a free port, driven over HTTP with httpx: what only a
real grade or a real server shows (the same result as `grade batch`, re-uploads and one upload
twice at once, uploads cut off on the socket, signed callbacks, a restart, the page's escaping of
a real grade). The rest of the HTTP contract (tokens, refusals, paging, rate limits, no page, no
tokens) is tests/test_service_contract.py's, in process."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import select
import socket
import stat
import subprocess
import sys
import time

import pytest

from tests.support.corpus import graded_in_corpus
from tests.support.grading import SUBMISSIONS
from tests.support.serving import CallbackReceiver, Server, bug_ids, summary, two_tokens

# A correct file and three kinds of mistake, each in its corpus's first chunk (tests.support.corpus):
# a run of this file alone grades one chunk of each corpus for the comparison.
CORPUS = [SUBMISSIONS / "correct" / "einsum.py",
          SUBMISSIONS / "buggy" / "causal_mask_off_by_one__includes_next.py",
          SUBMISSIONS / "buggy" / "fixed_max_length__buffer32.py",
          SUBMISSIONS / "buggy" / "breaks_autograd__no_grad.py"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def tokens(folder):
    return two_tokens(folder)


@pytest.fixture(scope="module")
def server(folder, tokens):
    s = Server(folder, "--tokens", str(tokens[0]), "--slots", "2", "--callback-allow", "127.0.0.1", "--store", str(folder / "requests-store"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def a(tokens):
    return tokens[1]


@pytest.fixture(scope="module")
def b(tokens):
    return tokens[2]


# --- the contract ---------------------------------------------------------------------------

def test_healthz_and_openapi_need_no_token(server):
    health = server.client.get("/healthz").json()
    assert health["status"] == "ok" and health["database"] == "ok" and health["sandbox"] == "ok", health
    assert health["slots"] >= 1 and "problems" not in health
    spec = server.client.get("/openapi.json").json()
    assert {"/v1/grades", "/v1/grades/{grade_id}"} <= set(spec["paths"])
    upload = spec["paths"]["/v1/grades"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert upload["schema"]  # the form (file, exercise, format, callback_url) is described
    assert "swagger" in server.client.get("/docs").text.lower()


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_same_result_as_a_batch(server, a, path):
    """The service grades an upload as `grade batch` grades the same file (the corpus's result, graded
    in this run; that a batch grades as `grade FILE` does is test_queue's and test_docker's)."""
    data = path.read_bytes()
    answer = server.upload(a, data, path.name)
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    assert accepted == {"id": accepted["id"], "state": "queued", "url": f"/v1/grades/{accepted['id']}"}
    document = server.wait(a, accepted["url"])
    assert set(document) == {"id", "state", "url", "result"} and document["state"] == "done"
    assert summary(document["result"]) == summary(graded_in_corpus(path))
    assert document["result"]["submission"] == {"name": path.name, "sha256": hashlib.sha256(data).hexdigest()}


def test_reupload_is_answered_from_the_stored_result(server, a):
    data = CORPUS[1].read_bytes() + b"\n# re-upload test\n"
    first = server.grade(a, data, "again.py")
    again = server.upload(a, data, "again.py")
    # Answered at once, finished, with the very result of the first grade (its duration included).
    assert again.status_code == 200, again.text
    assert again.json()["state"] == "done" and again.json()["id"] != first["id"]
    assert again.json()["result"] == first["result"]
    changed = server.upload(a, data + b"# one more line\n", "again.py")
    assert changed.status_code == 202 and changed.json()["state"] == "queued"
    assert bug_ids(server.wait(a, changed.json()["url"])["result"]) == bug_ids(first["result"])


def test_the_same_upload_twice_at_once_is_graded_once(server, a, b):
    data = CORPUS[3].read_bytes() + b"\n# twice at once\n"
    first, second = server.upload(a, data, "twice.py"), server.upload(b, data, "twice.py")
    assert first.status_code == second.status_code == 202 and first.json()["id"] != second.json()["id"]
    one, other = server.wait(a, first.json()["url"]), server.wait(b, second.json()["url"])
    assert one["result"] == other["result"]  # one grade (its duration too), given to both


def test_platform_formats(server, a):
    data = CORPUS[2].read_bytes()
    native = server.grade(a, data, "fmt.py")["result"]
    gradescope = server.grade(a, data, "fmt.py", format="gradescope")["result"]
    assert gradescope["score"] == native["score"] and len(gradescope["tests"]) == len(native["tests"])
    prairielearn = server.grade(a, data, "fmt.py", format="prairielearn")["result"]
    assert prairielearn["gradable"] is True
    assert prairielearn["score"] == pytest.approx(native["score"] / native["max_score"])
    assert server.upload(a, data, "fmt.py", format="csv").status_code == 400


def test_rejected_and_unimportable_submissions_are_results(server, a):
    document = server.grade(a, b"def broken(:\n", "syntax.py")
    assert document["state"] == "done" and document["result"]["status"] == "rejected"
    assert "line 1" in document["result"]["message"]


def test_a_regrade_request_from_the_api_and_the_page_is_listed_for_the_instructor(server, a, b, folder):
    document = server.grade(a, b"def broken(:\n", "regrade_me.py")
    asks = f"/v1/grades/{document['id']}/regrade-requests"
    answer = server.client.post(asks, headers=a.headers, json={"reason": "The  colon\nis there <b>really</b>"})
    assert answer.status_code == 201 and answer.json()["reason"] == "The colon is there <b>really</b>", answer.text
    assert server.client.post(asks, headers=b.headers, json={"reason": "mine"}).status_code == 404  # another's
    assert server.client.post(asks, headers=a.headers, json={"reason": "  "}).status_code == 422
    assert server.client.post(asks, headers=a.headers, json={"reason": "x" * 2001}).status_code == 422
    assert server.client.post(asks, headers=a.headers, content=b"not json").status_code == 422

    uploaded = server.client.post("/grades", files={"file": ("from_the_page.py", b"def nope(:\n")})
    assert uploaded.status_code == 303, uploaded.text
    page_url = uploaded.headers["location"]
    deadline = time.monotonic() + 300
    while 'id="regrade"' not in (shown := server.client.get(page_url).text):
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)
    assert "your request is recorded" not in shown
    sent = server.client.post(f"{page_url}/regrade-request", data={"reason": "My file compiles here"})
    assert sent.status_code == 303
    assert "your request is recorded" in server.client.get(page_url).text
    refused = server.client.post(f"{page_url}/regrade-request", data={"reason": ""})
    assert refused.status_code == 400 and 'id="request-error"' in refused.text

    store = folder / "requests-store"   # the module's server keeps them there
    listed = subprocess.run([sys.executable, "-m", "grader", "requests", "--store", str(store), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    requests = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["name"], r["reason"], r["status"]) for r in requests] == [
        ("regrade_me.py", "The colon is there <b>really</b>", "rejected"),
        ("from_the_page.py", "My file compiles here", "rejected")]
    table = subprocess.run([sys.executable, "-m", "grader", "requests", "--store", str(store)],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert table.returncode == 0 and "regrade_me.py" in table.stdout and "My file compiles here" in table.stdout


# --- who may see what: tests/test_service_contract.py ------------------------------------------

@pytest.mark.unit
def test_the_tokens_file_keeps_no_token(tokens):
    path, a_token, b_token = tokens
    text = path.read_text()
    assert a_token.token not in text and b_token.token not in text
    assert a_token.token.partition(".")[2] not in text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


# --- size and rate limits -------------------------------------------------------------------

def _raw_request(server, head: bytes, body_chunks, *, stop_when_answered: bool) -> bytes:
    """Send a request over a plain socket, a chunk at a time; stop sending as soon as an answer
    starts (the service must not need the rest). The bytes of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            if stop_when_answered and select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        answer = b""
        sock.settimeout(60)
        while not answer.endswith(b"}"):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
    return answer


def test_a_declared_oversize_upload_is_413_before_its_body(server, a):
    head = (f"POST /v1/grades HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a.token}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000000\r\n\r\n").encode()
    # 1 KB of a declared 100 MB: the answer comes without the rest ever being sent.
    answer = _raw_request(server, head, [b"--b\r\n" + b"x" * 1024], stop_when_answered=False)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_streamed_oversize_upload_is_413_once_past_the_limit(server, a):
    head = (f"POST /v1/grades HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {a.token}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    piece = b"x" * 65536
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    opening = b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.py"\r\n\r\n'
    chunks = [f"{len(opening):x}\r\n".encode() + opening + b"\r\n", *([chunk] * 400)]  # 26 MB if all were sent
    answer = _raw_request(server, head, chunks, stop_when_answered=True)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert server.client.get("/healthz").status_code == 200


def test_an_oversize_file_from_a_client_is_413(server, a):
    answer = server.upload(a, b"#" * (17 * 1024 * 1024), "huge.py")
    assert answer.status_code == 413


# --- callbacks ------------------------------------------------------------------------------

@pytest.fixture
def receiver():
    with CallbackReceiver(fail_first=1) as r:
        yield r


def test_callback_is_signed_and_retried(server, a, receiver):
    url = receiver.url
    answer = server.upload(a, CORPUS[1].read_bytes() + b"\n# callback test\n", "cb.py", callback_url=url)
    assert answer.status_code == 202
    assert receiver.arrived.wait(240), f"no successful callback; received {len(receiver.received)}"
    assert len(receiver.received) == 2  # the first answered 500, the retry was delivered
    for headers, body in receiver.received:
        expected = "sha256=" + hmac.new(a.signing_secret.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Grader-Signature"], expected)
    sent = [json.loads(body) for _, body in receiver.received]
    # Inside what is signed: one delivery id for both attempts, and each attempt's own time.
    deliveries = [document.pop("delivery") for document in sent]
    assert deliveries[0]["id"] == deliveries[1]["id"] == receiver.received[-1][0]["X-Grader-Delivery"]
    assert all(abs(d["timestamp"] - time.time()) < 300 for d in deliveries)
    document = sent[-1]
    assert document["id"] == answer.json()["id"] and document["state"] == "done"
    read = _delivered(server, a, answer.json()["url"])
    assert read.pop("callback") == {"state": "delivered", "attempts": 2, "last_error": "status 500"}
    assert document == read
    assert bug_ids(document["result"]) == ["causal_mask_off_by_one"]


def _delivered(server, token, url: str, timeout: float = 30) -> dict:
    """The grade's document once its callback is recorded as delivered or failed (the service
    records an attempt just after the receiver has answered it)."""
    deadline = time.monotonic() + timeout
    while True:
        document = server.wait(token, url)
        if document.get("callback", {}).get("state") in ("delivered", "failed") or time.monotonic() > deadline:
            return document
        time.sleep(0.2)


def test_a_callback_that_never_succeeds_is_given_up_and_said_so(folder, tokens, a):
    """Every attempt refused: the grade's document says the callback failed, after how many
    attempts and why, and the service's log says it gave up."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/hook"  # nobody listens there
    s = Server(folder, "--tokens", str(tokens[0]), "--slots", "1", "--callback-allow", "127.0.0.1", env={"GRADER_CALLBACK_BACKOFF_S": "0.1,0.1"})
    try:
        answer = s.upload(a, CORPUS[0].read_bytes() + b"\n# unreachable callback\n", "cb.py", callback_url=url)
        document = _delivered(s, a, answer.json()["url"])
    finally:
        s.stop()
    callback = document["callback"]
    assert callback["state"] == "failed" and callback["attempts"] == 3, callback
    assert "ConnectError" in callback["last_error"], callback
    assert "given up after 3 attempt(s)" in s.log.read_text()


# --- the page, for hostile names and content ------------------------------------------------

HOSTILE = b'''import torch
print("<img src=x onerror=alert(2)>")

class CausalSelfAttention(torch.nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        raise RuntimeError("<script>alert(3)</script><b onmouseover=alert(4)>bold</b>")
'''


def test_hostile_names_and_content_are_escaped_on_the_page(server, a):
    answer = server.client.post("/grades", files={"file": ("<script>alert(1)</script>.py", HOSTILE)},
                                data={"exercise": "causal-self-attention"}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    location = answer.headers["location"]
    grade_id = location.rsplit("/", 1)[1]
    assert len(grade_id) >= 22  # 128 random bits
    pages = []
    deadline = time.monotonic() + 240
    while True:
        page = server.client.get(location)
        assert page.status_code == 200
        pages.append(page)
        if 'id="result"' in page.text or time.monotonic() > deadline:
            break
        assert 'http-equiv="refresh"' in page.text
        time.sleep(0.5)
    assert 'id="result"' in page.text, "the feedback page never came"
    for p in pages:
        assert "<script" not in p.text.lower() and "<img" not in p.text.lower() and "<b " not in p.text.lower()
        assert "script-src" not in p.headers["content-security-policy"]  # no script may run at all
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in page.text  # the student's error, shown as text
    assert 'data-status="graded"' in page.text
    # A page grade is nobody's on the API.
    assert server.client.get(f"/v1/grades/{grade_id}", headers=a.headers).status_code == 404
    assert server.client.get("/grades/AAAAAAAAAAAAAAAAAAAAAA").status_code == 404


def test_a_restarted_service_keeps_its_grades_with_store(folder, tokens, a):
    store = folder / "store"
    first = Server(folder, "--tokens", str(tokens[0]), "--slots", "1", "--store", str(store))
    try:
        data = CORPUS[3].read_bytes() + b"\n# store test\n"
        document = first.grade(a, data, "kept.py")
    finally:
        first.stop()
    second = Server(folder, "--tokens", str(tokens[0]), "--slots", "1", "--store", str(store))
    try:
        assert second.client.get(document["url"], headers=a.headers).json() == document
        again = second.upload(a, data, "kept.py")
        assert again.status_code == 200 and again.json()["result"] == document["result"]
    finally:
        second.stop()
