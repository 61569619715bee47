"""What grades the service's uploads, behind one small interface that mirrors `grader.queue`:

    engine.submit(data, name, exercise=..., time_limit=...) -> job id
    engine.state(job) -> "queued" | "running" | "done" | "failed"
    engine.result(job, timeout=...) -> the native result JSON (raises TimeoutError)

`Embedded` grades in this process's own warm pool (no Redis: one command for a course of a few
hundred); `Queued` hands the upload to the Celery workers through `grader.queue`. The service
never asks which one it holds.
"""
from __future__ import annotations

import concurrent.futures
import secrets
import threading
from typing import Protocol

from grader.errors import GraderError
from grader import grading
from grader.pool import Pool
from grader.result import JobState, Status



class Engine(Protocol):
    """What grades the service's uploads (the interface above): Embedded or Queued."""

    def submit(self, data: bytes, name: str, *, exercise: str, time_limit: float | None = None) -> str:
        """A job id for the upload, graded in the background; EngineBusy when no more fit."""

    def state(self, job: str) -> str:
        """Where the job is (a JobState's value)."""

    def result(self, job: str, *, timeout: float | None = None) -> dict:
        """The native result JSON; TimeoutError after `timeout` seconds."""

    def close(self) -> None:
        """Stop grading."""


class EngineBusy(GraderError):
    """The engine takes no more uploads now (its queue is full): the client retries later."""


class Embedded:
    """A warm pool of `slots` sandboxes fed by a bounded in-process queue of at most `backlog` grades
    waiting; a finished grade's result is kept until it is read once with result()."""

    def __init__(self, *, slots: int, sandbox: str = grading.DEFAULT_SANDBOX, backlog: int = 1000,
                 hidden: tuple[str, ...] = ()):
        self.sandbox, self.backlog = sandbox, backlog
        self.pool = Pool(sandbox=sandbox, slots=slots, hidden=hidden)  # hidden: the service's own files
        # One thread per slot: the pool's grade blocks, so more threads would only wait in it.
        self._threads = concurrent.futures.ThreadPoolExecutor(max_workers=self.pool.slots,
                                                              thread_name_prefix="grade-slot")
        self._jobs: dict[str, concurrent.futures.Future] = {}
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def submit(self, data: bytes, name: str, *, exercise: str, time_limit: float | None = None) -> str:
        with self._lock:
            waiting = sum(1 for j, f in self._jobs.items() if not f.done() and j not in self._running)
            if waiting >= self.backlog:
                raise EngineBusy(f"{waiting} uploads are waiting to be graded; try again in a minute")
            job = secrets.token_hex(16)
            self._jobs[job] = self._threads.submit(self._grade, job, data, name, exercise, time_limit)
        return job

    def _grade(self, job: str, data: bytes, name: str, exercise: str, time_limit: float | None) -> dict:
        with self._lock:
            self._running.add(job)
        try:
            return self.pool.grade_bytes(data, name, exercise=exercise, wall_s=time_limit).to_dict()
        finally:
            with self._lock:
                self._running.discard(job)

    def state(self, job: str) -> str:
        with self._lock:
            future = self._jobs.get(job)
            if future is None:
                raise KeyError(job)
            if not future.done():
                return JobState.RUNNING if job in self._running else JobState.QUEUED
        return (JobState.FAILED if future.exception() is not None or future.result()["status"] == Status.ERROR
                else JobState.DONE)

    def result(self, job: str, *, timeout: float | None = None) -> dict:
        with self._lock:
            future = self._jobs[job]
        try:
            document = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError as err:
            raise TimeoutError(f"grade {job} is not finished") from err
        with self._lock:
            self._jobs.pop(job, None)  # read once: the service stores it
        return document

    def close(self) -> None:
        self.pool.shutdown()
        self._threads.shutdown(wait=False, cancel_futures=True)


class Queued:
    """Uploads go to the Celery workers on `broker` (grader.queue), interactive lane first."""

    def __init__(self, *, broker: str, sandbox: str = grading.DEFAULT_SANDBOX):
        from grader import queue  # only this mode needs Celery and a broker
        self._queue, self.broker, self.sandbox = queue, broker, sandbox

    def submit(self, data: bytes, name: str, *, exercise: str, time_limit: float | None = None) -> str:
        try:
            return self._queue.submit(self.broker, data, name, exercise=exercise, sandbox=self.sandbox,
                                      time_limit=time_limit, lane="interactive")
        except (ConnectionError, ValueError) as err:  # the queue's Redis is away, or refuses the limits
            raise EngineBusy(f"the grading queue takes no uploads now: {err}") from err

    def state(self, job: str) -> str:
        return self._queue.state(self.broker, job)

    def result(self, job: str, *, timeout: float | None = None) -> dict:
        return self._queue.result(self.broker, job, timeout=timeout)

    def close(self) -> None:
        pass
