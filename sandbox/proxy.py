"""The harness's side of the trust boundary: a proxy for the student's module in another process.

Tests call `Student.new(...)` and get a `RemoteModule` whose calls travel over pipes to a worker
forked by the zygote. A worker that hangs, exits, crashes, floods its output or breaks the protocol
is killed; the call raises `WorkerFailure` (so only that test fails) and the next call forks a
fresh worker.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from sandbox import protocol
from sandbox.protocol import bounded
from sandbox.confine import student_id
from sandbox.limits import Limits, PidsCgroup
from sandbox.contract import CLASS, Entry
from sandbox.errors import GraderError


class StudentCodeError(GraderError):
    """The student's code raised an exception while serving a request."""

    def __init__(self, op: str, error: dict, where: str | None):
        self.op = op
        self.type = bounded(error.get("type", "Exception"), 200)
        self.message = bounded(error.get("message", ""))
        self.line = error.get("line") if isinstance(error.get("line"), int) else None
        self.where = where
        super().__init__(self.describe())

    def describe(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        hint = self.limit_hit()
        text += f" ({hint})" if hint else ""
        return f"{text}\n  at {self.where}" if self.where else text

    def limit_hit(self) -> str | None:
        """Which sandbox limit an exception most likely comes from, if any."""
        if self.type == "MemoryError" or "can't allocate memory" in self.message:
            return "the sandbox's memory limit was hit"
        if self.type == "BlockingIOError" or "Resource temporarily unavailable" in self.message \
                or "can't start new thread" in self.message:
            return "the sandbox's process-count limit was hit"
        if "File too large" in self.message:
            return "the sandbox's file-size limit was hit"
        if "C++ compiler" in self.message or self.type == "InvalidCxxCompiler":
            return ("torch.compile's default backend needs a C++ compiler, and this sandbox has none: "
                    "grade it where one is installed, or submit the layer without torch.compile")
        return None


class BadAnswer(StudentCodeError):
    """The student's code answered with something that is not a usable answer (a bool, integer or
    complex tensor where a floating one is due): that test fails, with what was wrong."""

    def __init__(self, op: str, message: str):
        super().__init__(op, {"type": "BadAnswer", "message": message}, None)

    def describe(self) -> str:
        return self.message


class WorkerFailure(GraderError):
    """The worker process stopped serving: a timeout, an exit, a crash, an output flood."""

    def __init__(self, kind: str, message: str):
        self.kind = kind  # "timeout" | "exit" | "flood" | "protocol" | "budget" | "setup"
        self.message = message
        super().__init__(message)


class WorkerSetupFailed(GraderError):
    """The sandbox could not set up the first worker before any of the student's code ran: the
    grader's failure (status error), never the student's."""




@dataclass
class _WorkerProcess:
    pid: int
    req_fd: int
    resp_fd: int
    output: _OutputDrain
    tally_fd: int = -1  # read end of the pipe the worker counts refusals into (audit.py)
    notes: list[str] = field(default_factory=list)  # what the confinement could not do (sent before the import)


class Zygote:
    """A running zygote process: started here (optionally in new PID and network namespaces), or
    started by a container's entry point and handed over as a socket."""

    def __init__(self, control: socket.socket, process: subprocess.Popen | None, notes: list[str],
                 cgroup: PidsCgroup | None = None):
        self.control, self.process, self.notes, self.cgroup = control, process, notes, cgroup
        self.processes_capped = cgroup is not None  # a pids cgroup bounds the zygote and its workers
        self.lock = threading.Lock()
        self._ready: dict | None = None

    @classmethod
    def start(cls, *, isolate: bool = True, max_pids: int = 0, warm: tuple[str, ...] | None = None) -> Zygote:
        """Start a zygote here; with max_pids, inside a pids cgroup where this process may make one;
        `warm`: the warm-up sources it runs for its workers (a warm sandbox's zygote, which serves many)."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        notes = []
        cgroup = PidsCgroup.create(max_pids) if max_pids else None
        prefix = namespace_prefix() if isolate else None
        if isolate and prefix is None:
            notes.append("network not isolated: this OS does not let the grader create namespaces")
        cmd = (prefix or []) + zygote_command(child.fileno(), warm)
        process = subprocess.Popen(cmd, pass_fds=[child.fileno()], stdin=subprocess.DEVNULL,
                                   env=zygote_env(), preexec_fn=cgroup.enter if cgroup else None)
        child.close()
        return cls(parent, process, notes, cgroup)

    @classmethod
    def attached(cls, fd: int, *, ready: bool = False, notes: list[str] | None = None,
                 capped: bool = False) -> Zygote:
        """A zygote someone else started (a container's entry point, a warm server), reached through
        `fd`; `ready` when that one already took its ready message, `capped` when it put it in a
        pids cgroup."""
        zygote = cls(socket.socket(fileno=fd), None, list(notes or ()))
        zygote.processes_capped = capped
        if ready:
            zygote._ready = {"event": "ready"}
        return zygote

    def wait_ready(self, timeout_s: float) -> None:
        if self._ready is None:
            self._ready = self._recv(timeout_s)

    def spawn(self, *, path: str, cwd: str, entry: Entry, limits: Limits,
              hidden: tuple[str, ...] = (), uid: int | None = None) -> _WorkerProcess:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        tally_r, tally_w = os.pipe()
        command = {"op": "spawn", "path": path, "cwd": cwd, "limits": limits.to_dict(),
                   "processes_capped": self.processes_capped, "entry": entry.to_dict(),
                   "really_root": os.geteuid() == 0, "hidden": list(hidden), "uid": uid}
        try:
            with self.lock:
                socket.send_fds(self.control, [json.dumps(command).encode()], [req_r, resp_w, out_w, tally_w])
                answer = self._recv(10.0)
            if "pid" not in answer:
                raise WorkerFailure("exit", str(answer.get("error", "the sandbox could not start a worker")))
        except (OSError, WorkerFailure) as err:
            for fd in (req_w, resp_r, out_r, tally_r):  # no worker holds the other ends: ours go too
                os.close(fd)
            if isinstance(err, WorkerFailure):
                raise
            raise WorkerFailure("exit", "the sandbox's process spawner is gone (did your code kill it?)") from err
        finally:
            for fd in (req_r, resp_w, out_w, tally_w):
                os.close(fd)
        os.set_blocking(req_w, False)  # requests are written against a deadline (protocol.send)
        os.set_blocking(tally_r, False)
        return _WorkerProcess(int(answer["pid"]), req_w, resp_r, _OutputDrain(out_r, limits.output_bytes),
                              tally_r)

    def kill(self, pid: int) -> None:
        self._command({"op": "kill", "pid": pid})

    def exit_status(self, pid: int) -> int | None:
        return self._command({"op": "status", "pid": pid, "wait_s": 0.5}).get("status")

    def close(self) -> None:
        """Kill the zygote we started (in a PID namespace every worker dies with it); a zygote we
        were handed exits when its socket closes, and its container ends the rest."""
        self.control.close()  # a zygote that cannot be killed from here exits when its socket closes
        if self.process is not None:
            try:
                self.process.kill()
            except PermissionError:  # another user's (the student's, in the image)
                pass
            self.process.wait()
        if self.cgroup is not None:
            self.cgroup.remove()

    def _command(self, command: dict) -> dict:
        with self.lock:
            try:
                self.control.send(json.dumps(command).encode())
                return self._recv(5.0)
            except (OSError, WorkerFailure):
                return {}

    def _recv(self, timeout_s: float) -> dict:
        self.control.settimeout(timeout_s)
        try:
            data = self.control.recv(1 << 16)
        except TimeoutError as err:
            raise WorkerFailure("timeout", "the sandbox's process spawner did not answer") from err
        if not data:
            raise WorkerFailure("exit", "the sandbox's process spawner exited")
        try:  # the zygote shares the student's user in a container: its answers are checked too
            answer = json.loads(data)
        except (ValueError, RecursionError) as err:
            raise WorkerFailure("protocol", "the sandbox's process spawner sent garbage") from err
        if not isinstance(answer, dict) or ("pid" in answer and not isinstance(answer["pid"], int)):
            raise WorkerFailure("protocol", "the sandbox's process spawner sent garbage")
        return answer


def zygote_command(fd: int, warm: tuple[str, ...] | None = None) -> list[str]:
    """How a zygote is started, commanded through socket `fd` (-P: the worker's folder must never
    shadow a module the zygote imports); `warm`: the warm-up sources it runs first."""
    from sandbox.zygote import encode_sources
    return [sys.executable, "-P", "-m", "sandbox.zygote", str(fd),
            *(["--warm", encode_sources(warm)] if warm is not None else [])]


def zygote_env() -> dict:
    """The zygote's (and so every worker's) environment: only what Python and torch need."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


_PREFIX_CACHE: list | None = None


def namespace_prefix() -> list[str] | None:
    """The `unshare` command that puts the zygote in new PID, network and IPC namespaces, if it works."""
    global _PREFIX_CACHE
    if _PREFIX_CACHE is not None:
        return _PREFIX_CACHE or None
    tool = shutil.which("unshare")
    # --mount-proc: the workers' /proc shows only their own namespace, not the harness's fds.
    # --ipc: System V shared memory and semaphores stay inside the grade.
    isolated = ["--net", "--pid", "--ipc", "--fork", "--kill-child", "--mount", "--mount-proc"]
    candidates = [isolated, ["--net", "--pid", "--ipc", "--fork", "--kill-child"]]
    if os.geteuid() != 0:
        candidates[:0] = [["--user", "--map-root-user", *isolated],
                          ["--user", "--map-root-user", "--net", "--pid", "--ipc", "--fork", "--kill-child"]]
    if tool:
        for flags in candidates:
            probe = subprocess.run([tool, *flags, "true"], capture_output=True)
            if probe.returncode == 0:
                _PREFIX_CACHE = [tool, *flags]
                return _PREFIX_CACHE
    _PREFIX_CACHE = []
    return None


class _OutputDrain:
    """Reads what the worker prints, keeps the start of it, and flags a flood."""

    KEEP = 4096

    def __init__(self, fd: int, limit: int):
        self.fd, self.limit = fd, limit
        self.kept = bytearray()
        self.total = 0
        self.flooded = threading.Event()
        self.on_flood: Callable[[], None] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                break
            self.total += len(chunk)
            room = self.KEEP - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            if self.total > self.limit and not self.flooded.is_set():
                self.flooded.set()
                if self.on_flood:
                    self.on_flood()
        os.close(self.fd)

    def text(self) -> str:
        return self.kept.decode(errors="replace")


@dataclass
class LoadResult:
    """What the worker said after importing the submission."""
    ok: bool
    reason: str | None = None
    detail: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Student:
    """The submission as the tests see it: fresh workers on demand, every call bounded in time."""

    def __init__(self, zygote: Zygote, *, path: str, entry: Entry, limits: Limits,
                 deadline: float, scratch: str | None = None, locate=None, source: bytes = b"",
                 source_lines: list[str] | None = None, hidden: tuple[str, ...] = ()):
        self.zygote, self.path, self.entry, self.limits = zygote, path, entry, limits
        self.hidden = hidden  # paths the worker may not read (the tests, other grades' files)
        # As root, this grade's workers run under a uid and gid of their own (sandbox.confine)
        self.uid = student_id() if os.geteuid() == 0 else None
        self.scratch = scratch or os.path.dirname(path)  # the worker's working folder
        self.locate = locate or (lambda line: f"line {line}")
        self.source = source  # the submission's bytes, read before its code ran: what Python compiles
        self.source_lines = source_lines or []  # the submission's text, for pointing at lines
        self.deadline = deadline  # time.monotonic() by which the harness must be writing its report
        self.worker: _WorkerProcess | None = None
        self.budget_left = limits.tests_s
        self.restarts = 0
        self.timeouts = 0
        self.answers = 0  # responses received: a test that raised after one was handling the student's data
        self.load_result: LoadResult | None = None
        self.tally: dict[int, int] = {}  # byte -> how often the workers wrote it (audit.py)

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> LoadResult:
        """Start the first worker; its import of the submission decides whether it is gradable."""
        self.zygote.wait_ready(max(self.deadline - time.monotonic(), 1.0))
        try:
            ready = self._start(self.limits.import_s)
        except WorkerFailure as failure:
            if failure.kind == "setup":  # none of the student's code has run yet: ours to fix
                raise WorkerSetupFailed(failure.message) from failure
            self.load_result = LoadResult(False, f"import_{failure.kind}", {"message": failure.message})
            return self.load_result
        assert self.worker is not None  # _start set it
        self.load_result = LoadResult(bool(ready.get("ok")), ready.get("reason"), ready, self.worker.notes)
        return self.load_result

    def _start(self, timeout_s: float) -> dict:
        self._keep_source()
        worker = self.zygote.spawn(path=self.path, cwd=self.scratch, entry=self.entry,
                                   limits=self.limits, hidden=self.hidden, uid=self.uid)
        worker.output.on_flood = lambda: self.zygote.kill(worker.pid)
        self.worker = worker
        deadline = min(time.monotonic() + timeout_s, self.deadline)
        # The first frame comes from the trusted side of the fork, before the import: the only notes taken.
        confined = self._receive("setup", deadline)
        if not isinstance(confined, dict) or confined.get("event") != "confined":
            self._fail("protocol", "the worker did not start as expected")
        worker.notes = [str(n) for n in confined.get("notes") or ()]
        # The worker says when its own set-up is done and the student's file is next: a worker that
        # ends before that failed in the sandbox's code, not in the student's.
        importing = self._receive("setup", deadline)
        if not isinstance(importing, dict) or importing.get("event") != "importing":
            self._fail("protocol", "the worker did not start as expected")
        ready = self._receive("import", deadline)
        if not isinstance(ready, dict) or ready.get("event") != "ready":
            self._fail("protocol", "the worker did not start as expected")
        return ready

    def _keep_source(self) -> None:
        """Every worker imports the file again: it must hold the bytes the harness read (and the
        diagnosis scanned) before any of the student's code ran, which that code may since have
        rewritten, to be imported by the next worker."""
        if not self.source:
            return
        try:
            with open(self.path, "rb") as f:
                if f.read() == self.source:
                    return
        except OSError:
            pass
        try:
            kept = self.path + ".kept"
            with open(kept, "wb") as f:
                f.write(self.source)
            os.replace(kept, self.path)
        except OSError as err:
            raise WorkerFailure("exit", "your code changed the submission file, and the grader could not "
                                        "put it back: the rest of the grade cannot run your code") from err

    def close(self) -> None:
        if self.worker:
            self.zygote.kill(self.worker.pid)
            self._read_tally(self.worker)
            os.close(self.worker.req_fd)
            os.close(self.worker.resp_fd)
            self.worker = None

    @contextlib.contextmanager
    def side_allowance(self, *, timeouts: int = 1):
        """Calls made inside (a diagnosis, say) stop after `timeouts` timeouts and leave the tests'
        own allowance of timeouts and time as it was."""
        saved = self.timeouts, self.budget_left
        self.timeouts = max(self.limits.max_timeouts - timeouts, 0)
        try:
            yield
        finally:
            self.timeouts, self.budget_left = saved

    # -- requests ----------------------------------------------------------------------------
    def request(self, op: str, **fields) -> dict:
        """One round trip to the worker; raises StudentCodeError or WorkerFailure."""
        if time.monotonic() >= self.deadline:
            raise WorkerFailure("budget", f"not run: the grade's time limit ({self.limits.wall_s:g} s) "
                                          f"was reached")
        if self.budget_left <= 0:
            raise WorkerFailure("budget", f"not run: the time budget for the student's code "
                                          f"({self.limits.tests_s:.0f} s) is used up")
        if self.timeouts >= self.limits.max_timeouts:
            raise WorkerFailure("budget", f"not run: your code already timed out {self.timeouts} times, "
                                          f"so the remaining calls were not attempted")
        if self.worker is None:
            self.restarts += 1
            ready = self._start(self.limits.import_s)
            if not ready.get("ok"):
                self._fail("exit", "the submission no longer imports in a fresh worker")
        worker = self.worker
        assert worker is not None  # _start set it
        timeout = min(self.limits.call_s, self.budget_left, self.deadline - time.monotonic())
        started = time.monotonic()
        try:
            try:
                protocol.send(worker.req_fd, {"op": op, **fields}, deadline=started + timeout)
            except protocol.Deadline:
                self._fail("timeout", f"your code stopped reading requests; a call did not start within "
                                      f"{self.limits.call_s:g} s")
            except OSError:
                pass  # the worker is gone: _receive reports how it ended
            response = self._receive(op, started + timeout)
        finally:
            self.budget_left -= time.monotonic() - started
        self.answers += 1
        if not response.get("ok"):
            raw_error = response.get("error")
            error = raw_error if isinstance(raw_error, dict) else {}
            line = error.get("line") if isinstance(error.get("line"), int) else None
            raise StudentCodeError(op, error, self.locate(line) if line else None)
        return response

    def _receive(self, op: str, deadline: float) -> dict:
        """The worker's answer to `op`."""
        worker = self.worker
        assert worker is not None  # only called once _start set it
        try:
            return protocol.recv(worker.resp_fd, deadline=deadline)
        except protocol.Deadline:
            seconds = self.limits.import_s if op in ("setup", "import") else self.limits.call_s
            what = "importing your file" if op in ("setup", "import") else "a call into your code"
            self._fail("timeout", f"{what} did not finish within {seconds:g} s (an infinite loop?)")
        except protocol.PeerClosed:
            if worker.output.flooded.is_set():
                self._fail("flood", f"your code printed more than {self.limits.output_bytes >> 20} MiB")
            if op == "setup":
                self._fail("setup", f"the sandbox could not set up a worker process before importing "
                                    f"your file ({self._exit_message(worker, own=True)})")
            self._fail("exit", self._exit_message(worker))
        except protocol.ProtocolError as err:
            self._fail("protocol", f"the worker process sent a malformed answer ({bounded(err, 300)})")
        raise AssertionError("unreachable")

    def _exit_message(self, worker: _WorkerProcess, own: bool = False) -> str:
        """How the worker ended; `own`: before the student's code ran, so no hint at the student."""
        status = self.zygote.exit_status(worker.pid)
        if own:
            return "it ended" if status is None else f"wait status {status}"
        if status is None:
            return "the process running your code ended unexpectedly"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            hints: dict[int, str] = {signal.SIGXCPU: f" (CPU time limit of {self.limits.cpu_s} s)",
                                     signal.SIGKILL: " (killed: memory or process limit?)",
                                     signal.SIGXFSZ: f" (file size limit of {self.limits.file_bytes >> 20} MiB)",
                                     signal.SIGSEGV: " (a crash)"}
            hint = hints.get(sig, "")
            return f"the process running your code was killed by signal {signal.Signals(sig).name}{hint}"
        code = os.WEXITSTATUS(status)
        return (f"your code ended the process with exit code {code} "
                f"(sys.exit, os._exit or similar are not allowed in a submission)")

    def _fail(self, kind: str, message: str) -> NoReturn:
        worker = self.worker
        self.worker = None
        if worker:
            self.zygote.kill(worker.pid)
            self._read_tally(worker)
            for fd in (worker.req_fd, worker.resp_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
        if kind == "timeout":
            self.timeouts += 1
        raise WorkerFailure(kind, message)

    def printed(self) -> str:
        return self.worker.output.text() if self.worker else ""

    # -- module API --------------------------------------------------------------------------
    def calls_to_watched(self) -> dict[str, int]:
        """How often the worker refused so far, by every worker of this grade: each of the
        exercise's refused implementations (Entry.refuse) by its dotted path, and each rule of what
        no honest solution needs (sandbox.audit.KIT_RULES) by its name. Read from the workers'
        tally pipes, not from their answers (audit.py)."""
        if self.worker:
            self._read_tally(self.worker)
        from sandbox import audit
        counts = {path: self.tally.get(i + 1, 0) for i, path in enumerate(self.entry.refuse)}
        counts.update({audit.rule_text(k): self.tally.get(audit.KIT_BASE + k, 0) for k in range(len(audit.KIT_RULES))})
        return counts

    def _read_tally(self, worker: _WorkerProcess) -> None:
        """Everything the worker has written into its tally pipe; the pipe is closed once the
        worker is gone (bytes it wrote before are still read)."""
        if worker.tally_fd < 0:
            return
        while True:
            try:
                chunk = os.read(worker.tally_fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                if self.worker is not worker:  # gone, and read to the end
                    os.close(worker.tally_fd)
                    worker.tally_fd = -1
                break
            for byte in set(chunk):
                self.tally[byte] = self.tally.get(byte, 0) + chunk.count(byte)

    def new(self, *args, dtype: str = "float64", seed: int = 0, train: bool = False,
            params: dict | None = None) -> RemoteModule:
        """A new instance of the entry class, built with `args` in the worker; with `params`, those
        loaded into it in the same round trip (as RemoteModule.set_params would)."""
        if self.entry.kind != CLASS:
            raise TypeError(f"the entry is a {self.entry.kind}: use function()")
        extra = {} if params is None else {"params": params}
        return self._remote(self.request("new", args=list(args), dtype=dtype, seed=seed, train=train, **extra), dtype)

    def function(self) -> RemoteModule:
        """The entry function, living in the worker: call it, map it, take its vjp."""
        if self.entry.kind == CLASS:
            raise TypeError("the entry is a class: use new(...)")
        return self._remote(self.request("new", args=[], dtype="float64"), "")

    def _remote(self, info: dict, dtype: str) -> RemoteModule:
        try:
            return RemoteModule(self, info, dtype)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as err:
            raise WorkerFailure("protocol", "the worker described the new module in a malformed way") from err


MAX_DIM, MAX_PARAM_NUMEL = 1 << 20, 1 << 26


class RemoteModule:
    """An instance of the entry class, or the entry function, living in the worker. Only tensors
    and plain data come back: a call gives one tensor, or a tuple of Entry.returns of them."""

    def __init__(self, student: Student, info: dict, dtype: str):
        self.student = student
        self.worker = student.worker
        self.handle = info["handle"]
        self.dtype = dtype
        self.children = {str(k): [str(c) for c in v] for k, v in dict(info.get("children", {})).items()}
        self.params = {str(k): tuple(int(s) for s in v) for k, v in dict(info.get("params", {})).items()}
        self.n_params = int(info.get("n_params", -1))
        for shape in self.params.values():  # the worker's word: a shape the harness could not allocate is a lie
            if any(not 0 <= s <= MAX_DIM for s in shape) or math.prod(shape) > MAX_PARAM_NUMEL:
                raise ValueError(f"implausible parameter shape {shape}")

    def _request(self, op: str, **fields) -> dict:
        if self.student.worker is not self.worker:
            raise WorkerFailure("exit", "the worker holding this module was restarted")
        return self.student.request(op, handle=self.handle, **fields)

    def set_params(self, params: dict) -> None:
        self._request("set_params", params=params)

    def __call__(self, *args):
        return self._answer(self._request("call", args=list(args)).get("out"))

    def call_with(self, params: dict, *args):
        """set_params(params), then a call, in one round trip."""
        return self._answer(self._request("call", args=list(args), params=params).get("out"))

    def map(self, calls: list, *, context: str | None = None) -> list:
        """A call for each argument tuple, in one round trip to the worker; `context`: one of the
        entry's named contexts to run them in."""
        outs = self._request("call_many", calls=[list(args) for args in calls], context=context).get("outs")
        if not isinstance(outs, list) or len(outs) != len(calls):
            raise WorkerFailure("protocol", "the worker's answer to a batch of calls was malformed")
        return [self._answer(out) for out in outs]

    def _answer(self, out):
        returns = self.student.entry.returns
        if returns == 1:
            return _tensor(out, "forward")
        if not isinstance(out, list) or len(out) != returns:
            raise WorkerFailure("protocol", f"the worker's answer was not {returns} values")
        return tuple(_tensor(o, "forward") for o in out)

    def shape_on(self, device: str, *args, one_device: bool = False) -> list:
        """The output's shape when the module and its inputs live on `device` (e.g. 'meta'); with
        `one_device`, every torch operation checks its tensors share one device, as a GPU does."""
        return list(self._request("shape_on", device=device, args=list(args), one_device=one_device).get("shape") or [])

    def changed_inputs(self, *args) -> list[int]:
        """The positions of the arguments that one call changes in place."""
        changed = self._request("changed_inputs", args=list(args)).get("changed")
        if not isinstance(changed, list) or not all(isinstance(i, int) and 0 <= i < len(args) for i in changed):
            raise WorkerFailure("protocol", "the worker's list of changed inputs was malformed")
        return changed

    def vjp(self, *args, cotangents, wrt: int = 0, output: int = 0):
        """Gradients of the output (of output number `output`, for a call that returns several),
        contracted with each cotangent, with respect to args[wrt]; stacked."""
        return _tensor(self._request("vjp", args=list(args), cotangents=cotangents, wrt=wrt,
                                     output=output).get("grads"), "backward")


def _tensor(value, what: str):
    """A tensor from the worker, checked at the one place answers enter the harness: what is not a
    floating-point tensor fails the test that asked for it, with what it was."""
    import torch
    if not isinstance(value, torch.Tensor):
        raise WorkerFailure("protocol", f"the worker's {what} answer was not a tensor")
    if not value.is_floating_point():
        kind = str(value.dtype).removeprefix("torch.")
        shown = {"forward": "your code returned", "backward": "the gradient of your code's output is"}[what]
        raise BadAnswer(what, f"{shown} a {kind} tensor of shape {tuple(value.shape)}; a floating-point "
                              f"tensor (float32 or float64, like the input) is expected")
    return value
