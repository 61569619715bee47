"""The harness's side of the trust boundary: a proxy for the student's module in another process.

Tests call `Student.new(...)` and get a `RemoteModule` whose calls travel over pipes to a worker
forked by the zygote. A worker that hangs, exits, crashes, floods its output or breaks the protocol
is killed; the call raises `WorkerFailure` (so only that test fails) and the next call forks a
fresh worker.
"""
from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import time
from dataclasses import dataclass, field
from typing import NoReturn

from sandbox import protocol
from sandbox.protocol import bounded
from sandbox.confine import student_id
from sandbox.contract import CLASS, Entry
# The failures a test catches, by the names the exercises' tests have always imported them under.
from sandbox.failures import BadAnswer, StudentCodeError, WorkerFailure, WorkerSetupFailed
from sandbox.limits import Limits
from sandbox.zygote_client import Zygote, _WorkerProcess

# A call's time limit counts the time the worker ran or slept, not the time it waited for a CPU
# that another process held: past the limit, a call whose worker spent BUSY_SHARE of the last
# BUSY_SLICE_S waiting for one gets another slice, up to BUSY_CAP times the limit (a correct
# chunked layer lost a point at T = 300 with the machine's load average at 7).
BUSY_SLICE_S = 0.5
BUSY_SHARE = 0.25
BUSY_CAP = 4


def _readable(fd: int, until: float) -> bool:
    """Whether `fd` has something to read by `until` (time.monotonic())."""
    return bool(select.select([fd], [], [], max(until - time.monotonic(), 0.0))[0])


__all__ = ["BadAnswer", "LoadResult", "RemoteModule", "Student", "StudentCodeError", "WorkerFailure",
           "WorkerSetupFailed"]


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
        own allowance of timeouts and time as it was. Once the tests have used up their allowance,
        no call is made inside either: the student was told the remaining calls were not
        attempted, and each would only wait out its time limit again."""
        saved = self.timeouts, self.budget_left
        spent = self.timeouts >= self.limits.max_timeouts
        self.timeouts = self.limits.max_timeouts if spent else max(self.limits.max_timeouts - timeouts, 0)
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
        # On a busy machine a call may wait past its limit while the worker waits for a CPU.
        cap = started + min(self.limits.call_s * BUSY_CAP, self.budget_left, self.deadline - started)
        try:
            try:
                protocol.send(worker.req_fd, {"op": op, **fields}, deadline=started + timeout)
            except protocol.Deadline:
                self._fail("timeout", f"your code stopped reading requests; a call did not start within "
                                      f"{self.limits.call_s:g} s")
            except OSError:
                pass  # the worker is gone: _receive reports how it ended
            response = self._receive(op, started + timeout, cap)
        finally:
            self.budget_left -= time.monotonic() - started
        self.answers += 1
        if not response.get("ok"):
            raw_error = response.get("error")
            error = raw_error if isinstance(raw_error, dict) else {}
            line = error.get("line") if isinstance(error.get("line"), int) else None
            raise StudentCodeError(op, error, self.locate(line) if line else None)
        return response

    def _receive(self, op: str, deadline: float, cap: float | None = None) -> dict:
        """The worker's answer to `op`; with `cap`, past `deadline` as long as the machine, not the
        student's code, is what keeps it (_answer_due)."""
        worker = self.worker
        assert worker is not None  # only called once _start set it
        try:
            return protocol.recv(worker.resp_fd, deadline=self._answer_due(worker, deadline, cap))
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

    def _answer_due(self, worker: _WorkerProcess, deadline: float, cap: float | None) -> float:
        """When the answer must be in: `deadline`, unless in the last slice before it the worker's
        threads spent at least BUSY_SHARE of the time runnable but waiting for a CPU (another
        process had it: a busy machine); then a slice later, as long as that goes on, up to `cap`.
        A loop that has the CPU, and code that sleeps, end at `deadline` as before; a correct call
        slowed by the machine's load is not failed for it."""
        if cap is None or cap <= deadline or _readable(worker.resp_fd, deadline - BUSY_SLICE_S):
            return deadline
        before = (time.monotonic(), self.zygote.run_queue_wait_ns(worker.pid))
        while not _readable(worker.resp_fd, deadline):
            now = (time.monotonic(), self.zygote.run_queue_wait_ns(worker.pid))
            if (now[0] >= cap or before[1] is None or now[1] is None
                    or now[1] - before[1] < BUSY_SHARE * 1e9 * (now[0] - before[0])):
                return deadline  # passed: the answer is late
            before, deadline = now, min(now[0] + BUSY_SLICE_S, cap)
        return deadline

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
