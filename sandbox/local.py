"""The local backend: the harness in a subprocess on this machine, under a wall-clock limit.

The student worker gets the rlimits and, on Linux, new PID and network namespaces (see
sandbox.zygote); the harness itself is trusted and only bounded in time. Its warm slot is a
long-lived server process on this machine (sandbox.warm).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from sandbox.backend import SCRIPT_NAME, Job, RunResult
from sandbox.launch import Launched, Tail, kill_group, run_harness
from sandbox.warm import WarmSandbox


class LocalSandbox:
    """Runs `python -m sandbox.harness` in a scratch folder that is removed afterwards, and which is
    the grade's own temporary root (TMPDIR): nothing of a grade lands in the machine's /tmp."""
    name = "local"
    contained = False

    def check(self) -> None:
        """Always usable: it needs only this Python."""

    def run(self, job: Job) -> RunResult:
        with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
            work = os.path.join(scratch, "work")
            os.mkdir(work)
            script = os.path.join(work, SCRIPT_NAME)
            with open(script, "wb") as f:
                f.write(job.source)
            job_file = os.path.join(scratch, "job.json")
            with open(job_file, "w") as f:  # the machine's temp folder stays hidden from the student
                json.dump(job.to_harness(script, hidden=(tempfile.gettempdir(),)), f)

            def launch(write_fd: int) -> Launched:
                # The grade's own temporary root: whatever the harness and the workers make goes there.
                process = subprocess.Popen(
                    [sys.executable, "-P", "-m", "sandbox.harness", job_file, str(write_fd)],
                    pass_fds=[write_fd], cwd=scratch, stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": scratch},
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
                log = Tail(process.stderr)
                return Launched(stop=lambda: kill_group(process), log=log.text)
            return run_harness(launch, job.limits.wall_s)

    def warm(self, prepare: list[dict]) -> WarmLocal:
        return WarmLocal(prepare)

    def close(self) -> None:
        """Nothing outlives a run."""


class WarmLocal(WarmSandbox):
    """The warm server as a child process of this one, in its own session."""
    backend = "local"

    def _open(self):
        self.process = subprocess.Popen([sys.executable, "-P", "-m", "sandbox.warm", *self._prepare_args()],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        return iter(lambda: self.process.stdout.read1(1 << 16), b"")

    def _write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def _stop(self) -> None:
        kill_group(self.process)
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
