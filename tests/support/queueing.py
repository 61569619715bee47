"""Helpers for the tests (and benches) that run the queue: a redis-server and `grade worker`
processes of the caller's own, started on a free port of 127.0.0.1 with the project's
deploy/redis.conf. Every wait is bounded; every process is killed, with all it started."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The processes started here keep their temporary files in this folder, apart from everything else on
# the machine: it is how they are found again (own_processes).
OWN_TMP = Path(tempfile.mkdtemp(prefix="queue-tests-"))
# The queue's secret for this test session, in a file only this user reads: the workers, batches and
# services started here, and this process's own grader.queue calls, sign and check with it.
SECRET_FILE = OWN_TMP / "queue.secret"
SECRET_FILE.write_text(os.urandom(32).hex() + "\n")
SECRET_FILE.chmod(0o600)
os.environ["GRADER_QUEUE_SECRET_FILE"] = str(SECRET_FILE)


def program(name: str) -> str:
    """The path of a program the project's scripts install (scripts/services); a test that needs a
    missing one fails, never skips: CI must run it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: scripts/services installs it (scripts/test runs it)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(condition, timeout: float, what: str, every: float = 0.1):
    """condition()'s first true value, polled until `timeout` seconds passed (then the test fails)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


class RedisServer:
    """A redis-server of this test's own, with the shipped configuration (an fsynced AOF, protected
    mode) and a password, as deploy/stack.py runs it."""

    def __init__(self, folder: Path, *, tls: bool = False):
        """`tls`: only a TLS port, with a certificate for 127.0.0.1 from a CA of its own (made with
        openssl), as the README's "Adding a machine" runs it between machines."""
        import redis
        self.folder, self.port, self.proc, self.tls = folder, free_port(), None, tls
        folder.mkdir()
        self.password = os.urandom(16).hex()
        if tls:
            self._certificates()
            ca = folder / "ca.crt"
            self.url = (f"rediss://:{self.password}@127.0.0.1:{self.port}/0"
                        f"?ssl_cert_reqs=required&ssl_ca_certs={ca}")
            self.client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=10, ssl=True,
                                      ssl_ca_certs=str(ca), ssl_cert_reqs="required")
        else:
            self.url = f"redis://:{self.password}@127.0.0.1:{self.port}/0"
            self.client = redis.Redis(port=self.port, password=self.password, socket_timeout=10)
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen([program("redis-server"), str(ROOT / "deploy" / "redis.conf"), "--port", str(self.port),
                                      "--bind", "127.0.0.1", "--dir", str(self.folder), "--daemonize", "no",
                                      "--requirepass", self.password, *self._tls_options()],
                                     stdout=open(self.folder / "redis.log", "a"), stderr=subprocess.STDOUT)
        until(self._answers, 30, "redis-server to answer")

    def _certificates(self) -> None:
        openssl, f = program("openssl"), self.folder
        subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
                        "-keyout", f / "ca.key", "-out", f / "ca.crt"], check=True, capture_output=True)
        subprocess.run([openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                        "-keyout", f / "redis.key", "-out", f / "redis.csr"], check=True, capture_output=True)
        (f / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        subprocess.run([openssl, "x509", "-req", "-in", f / "redis.csr", "-CA", f / "ca.crt", "-CAkey", f / "ca.key",
                        "-CAcreateserial", "-days", "2", "-extfile", f / "san.ext", "-out", f / "redis.crt"],
                       check=True, capture_output=True)

    def _tls_options(self) -> list[str]:
        if not self.tls:
            return []
        f = self.folder
        return ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(f / "redis.crt"),
                "--tls-key-file", str(f / "redis.key"), "--tls-ca-cert-file", str(f / "ca.crt"),
                "--tls-auth-clients", "no"]

    def _answers(self) -> bool:
        import redis
        try:
            return bool(self.client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): what a restart of the service does."""
        self.proc.terminate()
        self.proc.wait(30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


# CI runs as root on a machine with a Docker socket, where a worker or the service refuses the local
# sandbox unless told (tests/test_root_sandbox.py checks the refusal itself).
ACCEPT_LOCAL = ("--allow-weak-sandbox",)


class Workers:
    """`grade worker` processes, each in its own process group (killed with all it started). The
    pool's processes keep their temporary files in a folder of their own under OWN_TMP, by which
    kill_all finds what they started: a pool's end leaves any other pool of the session running."""

    def __init__(self, url: str, folder: Path, *, slots: int = 1):
        self.url, self.folder, self.slots, self.procs = url, folder, slots, {}
        self.tmp = Path(tempfile.mkdtemp(prefix="pool-", dir=OWN_TMP))
        self._from: dict[str, int] = {}  # where each log starts for the test reading it (mark)

    def start(self, name: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
        proc = self.launch(name, *extra, env=env)
        self.ready(name)
        return proc

    def start_all(self, *names: str) -> None:
        """Start the named workers side by side, then wait for each to be ready (one after the
        other, a worker's start is mostly its imports and its warm sandbox's: the cores share them)."""
        for name in names:
            self.launch(name)
        for name in names:
            self.ready(name)

    def launch(self, name: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
        log = self.folder / f"{name}.log"
        proc = subprocess.Popen([sys.executable, "-m", "grader", "worker", "--broker", self.url,
                                 "--slots", str(self.slots), "--sandbox", "local", "--name", f"{name}@test",
                                 *ACCEPT_LOCAL, *extra],
                                stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(self.tmp), **(env or {})})
        self.procs[name] = proc
        return proc

    def ready(self, name: str) -> None:
        until(lambda: f"worker {name}@test ready:" in self.log(name), 180, f"worker {name} to be ready (every slot warm)")

    def mark(self) -> None:
        """From now on log() and grade_lines() read only what the workers write after this call:
        what a test that shares the pool with others wrote, not theirs."""
        self._from = {name: len((self.folder / f"{name}.log").read_text()) for name in self.procs}

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()[self._from.get(name, 0):]

    def grade_lines(self, *names: str, count: int = 0) -> list[str]:
        """The "grade:" log lines of the named workers. A worker writes one just after it stores
        the result, so a client can hear a result a moment before its line is there: with
        `count`, wait (up to 15 s) until at least that many lines are written."""
        def lines() -> list[str]:
            return [line for name in names for line in self.log(name).splitlines() if "grade: " in line]
        until(lambda: len(lines()) >= count, 15, f"{count} grade line(s) in the log of worker(s) {', '.join(names)}")
        return lines()

    def kill(self, name: str) -> None:
        try:
            os.killpg(self.procs[name].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.procs[name].wait(30)

    def kill_all(self) -> None:
        """Every worker, and then what they started in sessions of its own (warm sandboxes, which
        end on their own once their worker is gone): none of this test's processes is left."""
        for name in self.procs:
            self.kill(name)
        deadline = time.monotonic() + 30
        while own_processes(self.tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in own_processes(self.tmp):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def own_processes(folder: Path = OWN_TMP) -> list[int]:
    """The processes started here, known by `folder` (OWN_TMP, or a pool's own in it) in their environment."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if str(folder).encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found
