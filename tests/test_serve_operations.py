"""`grade serve` as an operator runs it for a term, through the real server process: tokens made and
revoked while it runs, callbacks that cannot be aimed at the service's own network, proxy headers
trusted only from the proxies named, connections that never finish their request cut, and slots
shared fairly, so that one client's long uploads cannot make another's wait for them."""
from __future__ import annotations

import socket
import time

import pytest

from tests.support.grading import SUBMISSIONS
from tests.support.serving import CallbackReceiver, Server, new_token, two_tokens

CORRECT = (SUBMISSIONS / "correct" / "einsum.py").read_bytes()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """The tokens file, in the module's folder (where the servers' logs go too), and two tokens."""
    return two_tokens(tmp_path_factory.mktemp("serve-ops"))


@pytest.fixture(scope="module")
def server(tokens):
    """One slot, no callback network allowed, a strict page limit: what the tests below share."""
    s = Server(tokens[0].parent, "--tokens", str(tokens[0]), "--slots", "1", "--page-rate-limit", "2")
    yield s
    s.stop()


def _grade_cli(*args: str):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=60)


# --- tokens ---------------------------------------------------------------------------------

def test_a_token_made_or_revoked_while_the_service_runs_counts_at_once(server, tokens):
    path = tokens[0]
    late = new_token(path, "course-late")  # made after the service started
    assert server.client.get("/v1/grades?since=0", headers=late.headers).status_code == 200
    listed = _grade_cli("token", "list", "--tokens", str(path))
    assert listed.returncode == 0 and "course-late" in listed.stdout and late.token not in listed.stdout
    revoked = _grade_cli("token", "revoke", late.token.partition(".")[0], "--tokens", str(path))
    assert revoked.returncode == 0, revoked.stderr
    assert server.client.get("/v1/grades?since=0", headers=late.headers).status_code == 401
    # The others are untouched, and an unknown id is one line naming the file's tokens.
    assert server.client.get("/v1/grades?since=0", headers=tokens[1].headers).status_code == 200
    unknown = _grade_cli("token", "revoke", "gt_nothere", "--tokens", str(path))
    assert unknown.returncode == 1 and "has no token 'gt_nothere'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


# --- callbacks ------------------------------------------------------------------------------

def test_callbacks_cannot_be_aimed_at_the_services_own_network(server, tokens):
    """Without --callback-allow, every way of writing a loopback, private, link-local or other
    non-public address is refused at upload, and the receiver listening on 127.0.0.1 hears nothing."""
    a = tokens[1]
    with CallbackReceiver() as receiver:
        port = receiver.server_address[1]
        aimed = [f"http://127.0.0.1:{port}/hook", f"http://localhost:{port}/hook", f"http://[::1]:{port}/hook",
                 f"http://2130706433:{port}/hook", f"http://127.1:{port}/hook", f"http://0x7f.1:{port}/hook",
                 f"http://0.0.0.0:{port}/hook", f"http://[::ffff:127.0.0.1]:{port}/hook",
                 f"http://[::ffff:7f00:1]:{port}/hook", "http://169.254.169.254/latest/meta-data/",
                 "http://10.0.0.1/hook", "http://172.16.5.4/hook", "http://192.168.1.1/hook",
                 "http://100.64.0.1/hook", "http://[fe80::1]/hook", "http://[fd00::1]/hook", "http://224.0.0.1/hook",
                 "http://[2002:7f00:1::1]/hook", "https://no-such-host.invalid/hook", "ftp://example.com/hook"]
        for url in aimed:
            answer = server.upload(a, CORRECT + f"\n# {url}\n".encode(), "cb.py", callback_url=url)
            assert answer.status_code == 400, (url, answer.text)
            detail = answer.json()["detail"]
            assert "public address" in detail or "does not resolve" in detail or "http or https" in detail, detail
        assert receiver.received == []


# --- proxies --------------------------------------------------------------------------------

def _page_codes(server: Server, forwarded: list[str]) -> list[int]:
    files = {"file": ("x.txt", b"not python")}  # refused by the form: no grade starts
    return [server.client.post("/grades", files=files, headers={"X-Forwarded-For": f}).status_code for f in forwarded]


def test_proxy_headers_count_only_from_the_proxies_named(server, tokens):
    # Not trusted: a new X-Forwarded-For on each request is the same address (127.0.0.1).
    spoofed = _page_codes(server, [f"203.0.113.{n}" for n in range(1, 7)])
    assert spoofed[0] == 400 and 429 in spoofed, spoofed
    behind = Server(tokens[0].parent, "--tokens", str(tokens[0]), "--slots", "1", "--page-rate-limit", "2",
                    "--trusted-proxy", "127.0.0.1")
    try:
        # Behind a proxy the operator named, each forwarded client has its own share...
        assert _page_codes(behind, [f"198.51.100.{n}" for n in range(1, 7)]) == [400] * 6
        # ...and one client is limited whatever its connection.
        assert 429 in _page_codes(behind, ["198.51.100.200"] * 6)
    finally:
        behind.stop()


# --- connections ----------------------------------------------------------------------------

def test_connections_that_never_finish_their_request_are_cut(server):
    """Connections that send nothing, headers that never end (one header line every second) and a
    body that stops: each is closed by the service within its deadline, and the service keeps
    answering meanwhile."""
    host, port = "127.0.0.1", server.port
    silent = [socket.create_connection((host, port)) for _ in range(40)]
    partial = [socket.create_connection((host, port)) for _ in range(40)]
    for s in partial:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: grader\r\n")
    trickle = socket.create_connection((host, port))
    stalled = socket.create_connection((host, port))
    stalled.sendall(b"POST /v1/grades HTTP/1.1\r\nHost: grader\r\nContent-Type: multipart/form-data; boundary=x\r\n"
                    b"Content-Length: 100000\r\n\r\n--x\r\n")
    opened = silent + partial + [trickle, stalled]
    for s in opened:
        s.settimeout(0.05)
    closed: dict[int, float] = {}
    start = time.monotonic()
    try:
        while len(closed) < len(opened) and time.monotonic() - start < 40:
            try:
                trickle.sendall(b"X-Slow: 1\r\n")
            except OSError:
                pass
            for i, s in enumerate(opened):
                if i not in closed:
                    try:
                        if s.recv(4096) == b"":
                            closed[i] = time.monotonic() - start
                    except TimeoutError:
                        pass
                    except OSError:
                        closed[i] = time.monotonic() - start
            assert server.client.get("/healthz").status_code == 200  # still answering
            time.sleep(1)
    finally:
        for s in opened:
            s.close()
    assert len(closed) == len(opened), f"{len(opened) - len(closed)} connection(s) still open after 40 s"
    assert closed[len(opened) - 2] < 20, "headers sent a line a second were not cut at their deadline"


# --- fairness -------------------------------------------------------------------------------

SLOW = CORRECT + b"\nimport time as _time\n_time.sleep(5)  # each import of the module takes 5 s\n"


def test_one_clients_long_uploads_do_not_hold_every_slot(tokens):
    """Two slots, two courses. Course A sends three uploads that each hold a slot for a long time;
    course B's upload, sent after them, is graded while A's second and third still wait: with
    another client about, A holds at most one slot of two, and B is not queued behind A's uploads.
    (Alone, a course's token may use both: B grades once first, so that A is not alone.)"""
    path, a, b = tokens
    s = Server(path.parent, "--tokens", str(path), "--slots", "2")
    try:
        s.grade(b, CORRECT + b"\n# course b is here\n", "first.py")
        urls = [s.upload(a, SLOW + f"\n# long upload {n}\n".encode(), f"long{n}.py").json()["url"]
                for n in range(3)]
        time.sleep(1)
        states = [s.client.get(u, headers=a.headers).json()["state"] for u in urls]
        assert states.count("queued") == 2, states  # one of A's grades runs, the others wait for A's share
        quick = s.grade(b, CORRECT + b"\n# course b\n", "quick.py")
        assert quick["result"]["score"] == quick["result"]["max_score"]
        later = [s.client.get(u, headers=a.headers).json()["state"] for u in urls[1:]]
        assert "queued" in later or "running" in later, later  # B did not wait for all of A's uploads
        assert all(s.wait(a, u)["result"]["score"] == 100 for u in urls)  # and A's are graded in the end
        health = s.client.get("/healthz").json()
        assert health["grading"] == 0 and health["waiting"] == 0, health
    finally:
        s.stop()
