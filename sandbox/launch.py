"""The one loop that runs a harness and takes its report, whichever backend launched it.

A backend says only how the harness starts (a subprocess here, a fork of a warm server, a process of
another user in the image): `launch(write_fd)` starts it writing its report into `write_fd` and
returns a `Launched`. This module owns the rest: the report pipe, reading it against the wall
clock, the size limit, the kill, and the wording of every way a run can end without a report.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sandbox.backend import RunResult, parse_report

_PR_SET_PDEATHSIG = 1
MAX_REPORT_BYTES = 64 << 20   # an honest report is well under 1 MiB


@dataclass
class Launched:
    """A harness that a backend started: `stop()` kills what was launched and gives its exit code
    when known; `log()` the end of its stderr, for diagnosing a grader fault."""
    stop: Callable[[], int | None]
    log: Callable[[], str] = lambda: ""


def run_harness(launch: Callable[[int], Launched], wall_s: float, *, started: float | None = None) -> RunResult:
    """Launch a harness, read its report until it ends or the wall clock (`wall_s` from `started`)
    runs out, then stop it; the report, or why there is none."""
    started = time.monotonic() if started is None else started
    read_fd, write_fd = os.pipe()
    try:
        launched = launch(write_fd)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the harness holds its own copy; EOF comes when it ends
    try:
        raw, timed_out = read_report(read_fd, started + wall_s)
    finally:
        os.close(read_fd)
        code = launched.stop()
    return outcome(raw, timed_out, wall_s, code, time.monotonic() - started, launched.log())


def outcome(raw: bytes | None, timed_out: bool, wall_s: float, code: int | None, duration_s: float,
            log: str = "") -> RunResult:
    """The RunResult of a run that gave `raw` (None: over the size limit): every failure worded here."""
    if timed_out:
        return RunResult(None, duration_s, f"the sandbox did not finish within {wall_s:g} s", log)
    if raw is None:
        return RunResult(None, duration_s, f"the harness's report exceeded the {MAX_REPORT_BYTES >> 20} MiB "
                                           "a report may have", log)
    if not raw:
        ended = f" (exit code {code})" if code is not None else ""
        return RunResult(None, duration_s, f"the harness ended without a report{ended}", log)
    report = parse_report(raw)
    if report is None:
        return RunResult(None, duration_s, "the harness's report is not a JSON object", log)
    return RunResult(report, duration_s, None, log)


def read_report(fd: int, deadline: float) -> tuple[bytes | None, bool]:
    """What `fd` gives until EOF or `deadline` (then True); None for a report over the size limit."""
    chunks: list[bytes] = []
    size = 0
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            return b"".join(chunks), True
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        size += len(chunk)
        if size > MAX_REPORT_BYTES:
            return None, False
        chunks.append(chunk)


def kill_group(process: subprocess.Popen) -> int | None:
    """SIGKILL the process group `process` leads (started with start_new_session), reap it, and
    give its exit code."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return process.wait()


class Tail(threading.Thread):
    """Drains a stream in the background and keeps its last few kilobytes."""

    def __init__(self, stream, keep: int = 8192):
        super().__init__(daemon=True)
        self.stream, self.keep, self.data = stream, keep, b""
        self.start()

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read(4096), b""):
            self.data = (self.data + chunk)[-self.keep:]
        self.stream.close()

    def text(self) -> str:
        self.join(5)
        return self.data.decode(errors="replace")


def fork_harness(job: dict, write_fd: int, *, then: Callable[[], None] | None = None) -> int:
    """Fork a harness for `job` (a HarnessJob as a dict, its zygote reached through its fd) from
    this process, which imported what it needs (a warm server, the image's entry point): in a
    session of its own, dying with this process, its report into `write_fd`. `then`: run in the
    child before the harness (the entry point's: become the image's `grader`). Returns its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        import ctypes
        os.setsid()
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        from sandbox.zygote import close_fds_except
        close_fds_except({0, 1, 2, write_fd, int(job["zygote"]["fd"])})  # not a server's protocol, nor the read end
        os.chdir(os.path.dirname(job["submission"]))
        if then is not None:
            then()
        from sandbox.harness import report_text
        text = report_text(job).encode()
        with os.fdopen(write_fd, "wb") as out:
            out.write(text)
    except BaseException:  # a forked child never falls back into its parent's code
        code = 70
    os._exit(code)


def kill_and_reap(pid: int) -> int | None:
    """SIGKILL a forked harness's session and wait for it: its exit code, when known."""
    from sandbox.zygote import kill_session
    kill_session(pid)
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return None
