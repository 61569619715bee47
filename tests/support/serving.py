"""Helpers for the tests of `grade serve`: start the real server process on a free port, make
tokens with the real CLI, wait for a grade. Every wait is bounded; every process is killed."""
from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.queueing import ACCEPT_LOCAL, RedisServer, Workers, free_port

START_TIMEOUT_S = 60
GRADE_TIMEOUT_S = 240


@dataclass
class ApiToken:
    token: str
    signing_secret: str

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"}


def new_token(tokens_file: Path, name: str) -> ApiToken:
    """`grade token new NAME --tokens FILE`, as an operator runs it."""
    proc = subprocess.run([sys.executable, "-m", "grader", "token", "new", name, "--tokens", str(tokens_file)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    fields = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    return ApiToken(fields["token"], fields["signing_secret"])


def two_tokens(folder: Path) -> tuple[Path, ApiToken, ApiToken]:
    """A tokens file in `folder` with two platforms' tokens, course-a's and course-b's."""
    path = folder / "tokens.json"
    return path, new_token(path, "course-a"), new_token(path, "course-b")


class CallbackReceiver(http.server.ThreadingHTTPServer):
    """A platform's endpoint on a free port of 127.0.0.1: records each callback (headers, raw body)
    and answers 500 to the first `fail_first` of them, 204 after; `arrived` is set on the first 204.
    Used as a context manager, it serves in a thread until the block ends."""

    def __init__(self, fail_first: int = 0):
        self.fail_first, self.received, self.arrived = fail_first, [], threading.Event()
        super().__init__(("127.0.0.1", 0), _CallbackHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def __enter__(self) -> CallbackReceiver:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


class _CallbackHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((dict(self.headers), body))
        failing = len(self.server.received) <= self.server.fail_first
        self.send_response(500 if failing else 204)
        self.end_headers()
        if not failing:
            self.server.arrived.set()

    def log_message(self, *args):
        pass


class Server:
    """One `grade serve` process of the test's own (its own session, killed as a group at the end)."""

    def __init__(self, folder: Path, *args: str, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"serve-{self.port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "grader", "serve", "--port", str(self.port),
                                          *ACCEPT_LOCAL, *args],
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, **(env or {})})
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"grade serve exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"grade serve did not answer /healthz in {START_TIMEOUT_S} s:\n"
                                     f"{self.log.read_text()}")
            time.sleep(0.2)
        self.client = httpx.Client(base_url=self.url, timeout=60)

    def kill(self) -> None:
        """kill -9 the service and everything it started, as a machine that dies would."""
        if getattr(self, "client", None):
            self.client.close()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=20)

    def stop(self) -> None:
        """SIGTERM (the service stops its sandboxes), then SIGKILL for the whole group if it lingers."""
        if getattr(self, "client", None):
            self.client.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of its group is left (sandboxes)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=20)

    def upload(self, token: ApiToken, data: bytes, name: str, **fields) -> httpx.Response:
        return self.client.post("/v1/grades", headers=token.headers, files={"file": (name, data)},
                                data={k: v for k, v in fields.items() if v is not None})

    def wait(self, token: ApiToken, url: str, timeout: float = GRADE_TIMEOUT_S) -> dict:
        """Poll a grade until it is done or failed; its last document."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.client.get(url, headers=token.headers)
            assert answer.status_code == 200, answer.text
            document = answer.json()
            if document["state"] in ("done", "failed"):
                return document
            assert document["state"] in ("queued", "running"), document
            assert time.monotonic() < deadline, f"{url} not finished after {timeout} s: {document}"
            time.sleep(0.3)

    def grade(self, token: ApiToken, data: bytes, name: str, **fields) -> dict:
        answer = self.upload(token, data, name, **fields)
        assert answer.status_code in (200, 202), answer.text
        return self.wait(token, answer.json()["url"])


def bug_ids(result: dict) -> list[str]:
    return sorted(b["id"] for b in result["bugs"])


def summary(result: dict) -> tuple:
    """What must agree between `grade FILE --json` and the service: status, score, the bugs."""
    return result["status"], result["score"], bug_ids(result)


def dumps(document) -> str:
    return json.dumps(document, indent=2)[:3000]


class QueueStack:
    """A redis-server on a free port and `workers` `grade worker` processes of `slots` each, all of
    the caller's own (tests.support.queueing); stop() kills them and all they started."""

    def __init__(self, folder: Path, *, workers: int = 2, slots: int = 1):
        self.redis = RedisServer(folder / "redis")
        self.broker = self.redis.url
        self.workers = Workers(self.broker, folder, slots=slots)
        try:
            self.workers.start_all(*(f"serve{n}" for n in range(1, workers + 1)))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.workers.kill_all()
        self.redis.kill()
