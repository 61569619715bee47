"""The local backend: the harness in a subprocess on this machine, under a wall-clock limit.

The student worker gets the rlimits and, on Linux, new PID and network namespaces (see
sandbox.zygote); the harness itself is trusted and only bounded in time.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

from sandbox.backend import SCRIPT_NAME, Job, RunResult

MAX_REPORT_BYTES = 64 << 20


class LocalSandbox:
    """Runs `python -m sandbox.harness` in a scratch folder that is removed afterwards, and which is
    the grade's own temporary root (TMPDIR): nothing of a grade lands in the machine's /tmp."""
    name = "local"

    def run(self, job: Job) -> RunResult:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
            work = os.path.join(scratch, "work")
            os.mkdir(work)
            script = os.path.join(work, SCRIPT_NAME)
            with open(script, "wb") as f:
                f.write(job.source)
            job_file = os.path.join(scratch, "job.json")
            with open(job_file, "w") as f:  # the machine's temp folder stays hidden from the student
                json.dump(job.to_harness(script, hidden=(tempfile.gettempdir(),)), f)
            read_fd, write_fd = os.pipe()
            try:  # the grade's own temporary root: whatever the harness and the workers make goes there
                process = subprocess.Popen(
                    [sys.executable, "-P", "-m", "sandbox.harness", job_file, str(write_fd)],
                    pass_fds=[write_fd], cwd=scratch, stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": scratch},
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            finally:
                os.close(write_fd)
            log = _Tail(process.stderr)
            try:
                raw, timed_out = read_until(read_fd, started + job.limits.wall_s)
            finally:
                os.close(read_fd)
                kill_group(process)
                log.join()
        duration = time.monotonic() - started
        if timed_out:
            return RunResult(None, duration, f"the sandbox did not finish within {job.limits.wall_s:g} s",
                             log.text())
        why = (f"the harness's report exceeded {MAX_REPORT_BYTES >> 20} MiB" if raw is None else
               f"the harness exited with code {process.returncode} without a report")
        return RunResult.of(raw, duration, why, log.text())


def read_until(fd: int, deadline: float) -> tuple[bytes | None, bool]:
    """What `fd` gives until EOF or `deadline` (then True); None for a report over the size limit."""
    chunks, size = [], 0
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


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group `process` leads (started with start_new_session), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


class _Tail(threading.Thread):
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
        return self.data.decode(errors="replace")
