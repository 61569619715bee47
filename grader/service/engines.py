"""What grades the service's uploads, behind one small interface that mirrors `grader.queue`:

    engine.submit(data, name, exercise=..., time_limit=...) -> job id
    engine.state(job) -> "queued" | "running" | "done" | "failed"
    engine.result(job, timeout=...) -> the native result JSON (raises TimeoutError)
    engine.health() -> (what /healthz shows of it, why grading cannot happen now or None)

`Embedded` grades in this process's own warm pool (no Redis: one command for a course of a few
hundred); `Queued` hands the upload to the Celery workers through `grader.queue`. The service
never asks which one it holds.
"""
from __future__ import annotations

import concurrent.futures
import logging
import secrets
import threading
import time
from typing import Any, Protocol

from grader.errors import GraderError
from grader import grading
from grader.pool import Pool
from grader.result import JobState, Status

SUBMIT_OUTAGE_S = 5.0   # how long an upload waits for a queue that does not answer before it is refused
HEALTH_CACHE_S = 2.0    # a load balancer may ask /healthz often: the sandbox's check is reused this long
QUEUED_AHEAD = 2        # grades the service keeps in the queue per worker slot (one graded, one waiting)

log = logging.getLogger("grader.service")


class Engine(Protocol):
    """What grades the service's uploads (the interface above): Embedded or Queued."""

    def submit(self, data: bytes, name: str, *, exercise: str, time_limit: float | None = None) -> str:
        """A job id for the upload, graded in the background; EngineBusy when no more fit."""

    def state(self, job: str) -> str:
        """Where the job is (a JobState's value)."""

    def result(self, job: str, *, timeout: float | None = None) -> dict:
        """The native result JSON; TimeoutError after `timeout` seconds."""

    def health(self) -> tuple[dict[str, Any], str | None]:
        """What /healthz shows of the engine, and why no upload can be graded now (None: it can)."""

    def slots(self) -> int:
        """How many grades it runs at once: the service sends it no more (fairness.FairQueue)."""

    def close(self) -> None:
        """Stop grading."""


class EngineBusy(GraderError):
    """The engine takes no more uploads now (its queue is full, or the queue does not answer): the
    client retries later. Its message is for the student: what happened, and what to do."""

    @classmethod
    def unavailable(cls, why: str) -> EngineBusy:
        """Grading cannot happen now (`why`, in a few words): said so, with what to do."""
        return cls(f"grading is unavailable right now ({why}), so your file was not graded: try again in a "
                   "few minutes")


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
        self._checked: tuple[float, str | None] = (-HEALTH_CACHE_S, None)  # (when, the sandbox's problem)

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

    def slots(self) -> int:
        return self.pool.slots

    def health(self) -> tuple[dict[str, Any], str | None]:
        when, problem = self._checked
        if time.monotonic() - when >= HEALTH_CACHE_S:
            from sandbox import registry
            try:
                registry.get(self.sandbox).check()
                problem = None
            except GraderError as err:
                problem = str(err)
            self._checked = (time.monotonic(), problem)
        with self._lock:
            running = len(self._running)
        shown = {"sandbox": problem or "ok", "slots": self.pool.slots, "grading": running}
        return shown, problem and f"the {self.sandbox} sandbox cannot start: {problem}"

    def close(self) -> None:
        self.pool.shutdown()
        self._threads.shutdown(wait=False, cancel_futures=True)


class Queued:
    """Uploads go to the Celery workers on `broker` (grader.queue), interactive lane first."""

    def __init__(self, *, broker: str, sandbox: str = grading.DEFAULT_SANDBOX):
        from grader import queue  # only this mode needs Celery and a broker
        self._queue, self.broker, self.sandbox = queue, broker, sandbox
        self._slots_seen: tuple[float, int] = (-HEALTH_CACHE_S, 1)   # (when asked, the workers' slots)

    def submit(self, data: bytes, name: str, *, exercise: str, time_limit: float | None = None) -> str:
        try:
            return self._queue.submit(self.broker, data, name, exercise=exercise, sandbox=self.sandbox,
                                      time_limit=time_limit, lane="interactive", outage_s=SUBMIT_OUTAGE_S)
        except (ConnectionError, ValueError) as err:  # the queue's Redis is away, or refuses the limits
            log.error("an upload was refused: the queue %s does not take it: %s", self._queue.shown(self.broker), err)
            raise EngineBusy.unavailable("the grading queue does not answer") from err

    def slots(self) -> int:
        """Twice the slots of the workers seen lately (at least 1 each: a worker may be on its
        way): each slot has the next task waiting in Redis behind the one it grades, so that a
        worker never idles while the service hears of a result and sends the next upload."""
        when, slots = self._slots_seen
        if time.monotonic() - when >= HEALTH_CACHE_S:
            self.health()
            slots = self._slots_seen[1]
        return QUEUED_AHEAD * slots

    def health(self) -> tuple[dict[str, Any], str | None]:
        import redis
        try:
            seen = self._queue.workers_seen(self.broker)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as err:
            self._slots_seen = (time.monotonic(), self._slots_seen[1])
            return {"queue": f"does not answer: {err}"}, "the grading queue does not answer"
        self._slots_seen = (time.monotonic(), max(1, sum(s for _, s, _ in seen)))
        shown = {"queue": "ok", "workers": len(seen), "slots": sum(s for _, s, _ in seen),
                 "warm_slots": sum(w for _, _, w in seen)}
        if not seen:
            return shown, f"no worker has sent a heartbeat in the last {self._queue.ALIVE_S} s"
        return shown, None

    def state(self, job: str) -> str:
        return self._queue.state(self.broker, job)

    def result(self, job: str, *, timeout: float | None = None) -> dict:
        return self._queue.result(self.broker, job, timeout=timeout)

    def close(self) -> None:
        pass
