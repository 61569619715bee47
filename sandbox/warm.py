"""Warm sandboxes for batch grading, the host's side: a slot per worker of the batch, each backed by
one long-lived server (sandbox.warm_server, started here or as a container's entry point) that
grades one submission after another in a fresh fork of itself; see that module for what each
submission gets. A server that ends, does not answer in time or cannot vouch for its clean-up is
replaced by a fresh one.

Protocol: one JSON object per line. The server says {"event": "ready", "notes": [...]} once, then
answers each job (the harness's job with the submission's "source" in base64, and an "id") with
{"id", "report" (the harness's report, or null), "failure"}, and then, once it has cleared up,
{"event": "reset", "clean": bool}; after a clean-up it cannot vouch for, it exits.
"""
from __future__ import annotations

import base64
import json
import os
import queue
import threading
import time
from collections.abc import Sequence

from sandbox.backend import Job, RunResult, SandboxUnavailable
from sandbox.contract import WARM_READY_TIMEOUT_S as READY_TIMEOUT_S
from sandbox.contract import WARM_RESET_TIMEOUT_S as RESET_TIMEOUT_S
from sandbox.errors import GraderError

REPLY_MARGIN_S = 30.0     # beyond a job's wall clock, on a busy machine


# --- the caller's side: a slot per worker of the batch ----------------------------------------

class ServerGone(GraderError):
    """The server ended, or did not answer in time."""


class _Lines:
    """Lines from a stream of byte chunks, read in the background, taken with a deadline."""

    def __init__(self, chunks):
        self.lines: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, args=(chunks,), daemon=True)
        self.thread.start()

    def _run(self, chunks) -> None:
        pending = b""
        try:
            for chunk in chunks:
                pending += chunk
                *done, pending = pending.split(b"\n")
                for line in done:
                    self.lines.put(line)
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def get(self, deadline: float) -> dict:
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty as err:
            raise ServerGone("the warm sandbox did not answer in time") from err
        if line is None:
            self.lines.put(None)
            raise ServerGone("the warm sandbox ended")
        try:
            return json.loads(line)
        except ValueError as err:
            raise ServerGone("the warm sandbox said something that is not JSON") from err


class WarmSandbox:
    """A Sandbox (run(job) -> RunResult) backed by one warm server, restarted whenever it must be."""
    backend = "local"
    contained = False

    def __init__(self, prepare: Sequence[dict] = ()):
        self.prepare = list(prepare)  # per exercise: {"tests": its test package, "warmup": its source}
        self._lines: _Lines | None = None
        self._reset_pending = False   # the server is clearing up after the last job
        self.notes: list[str] = []
        self.starts = 0
        self._shut = threading.Event()
        self._lock = threading.RLock()  # start and close, from the slot's thread and a Ctrl-C

    # The transport: subclasses start the server and say how to write to it and stop it.
    def _open(self):
        raise NotImplementedError

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def _prepare_args(self) -> list[str]:
        return ["--prepare", base64.b64encode(json.dumps(self.prepare).encode()).decode()]

    def start(self) -> None:
        """Have a server ready: the running one once it has cleared up after its last job, else a
        fresh one. Raises SandboxUnavailable when none starts, or after shutdown()."""
        self._settle()
        with self._lock:
            if self._lines is not None:
                return
            if self._shut.is_set():
                raise SandboxUnavailable(f"the warm {self.backend} sandbox was shut down")
            self.starts += 1
            lines = self._lines = _Lines(self._open())
        try:
            ready = lines.get(time.monotonic() + READY_TIMEOUT_S)
        except ServerGone as err:
            self.close()
            raise SandboxUnavailable(f"the warm {self.backend} sandbox did not start: {err}") from err
        self.notes = list(ready.get("notes") or [])

    def _settle(self) -> None:
        """Wait for the server's word on its clean-up after the last job; replace it unless clean."""
        lines = self._lines
        if not self._reset_pending or lines is None:
            return
        self._reset_pending = False
        try:
            clean = lines.get(time.monotonic() + RESET_TIMEOUT_S + REPLY_MARGIN_S).get("clean") is True
        except ServerGone:
            clean = False
        if not clean:
            self.close()

    def run(self, job: Job) -> RunResult:
        started = time.monotonic()
        message = {"id": os.urandom(6).hex(), "source": base64.b64encode(job.source).decode(),
                   **job.to_harness("")}
        failure = ""
        for _attempt in range(2):  # a server that died under a job gets one fresh retry
            self.start()
            lines = self._lines
            try:
                if lines is None:  # shut down meanwhile
                    raise ServerGone("the warm sandbox was shut down")
                self._write((json.dumps(message) + "\n").encode())
                reply = lines.get(time.monotonic() + job.limits.wall_s + REPLY_MARGIN_S)
            except (ServerGone, OSError, ValueError) as err:
                failure = str(err)
                self.close()
                continue
            self._reset_pending = True
            report = reply.get("report") if isinstance(reply.get("report"), dict) else None
            return RunResult(report, time.monotonic() - started,
                             None if report else str(reply.get("failure") or "the warm sandbox sent no report"))
        return RunResult(None, time.monotonic() - started, f"the warm {self.backend} sandbox failed: {failure}")

    def close(self) -> None:
        """Stop the server; the next job starts a fresh one."""
        with self._lock:
            if self._lines is not None:
                self._stop()
                self._lines = None
                self._reset_pending = False

    def shutdown(self) -> None:
        """Stop the server for good: a job in flight fails, and no new server starts."""
        self._shut.set()
        self.close()


