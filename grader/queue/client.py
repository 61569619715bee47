"""The queue's client: submit a grade, ask its state, wait for its result; a pool that grades a batch
through the workers."""
from __future__ import annotations

import base64
import hashlib
import threading
import time
from pathlib import Path


import exercise as exercises
from grader import course as courses
from grader import grading, keys, signing
from grader.pool import PoolClosed, upload_name
from grader.result import GradeResult, JobState, Status

from grader.queue.config import (ANY_SANDBOX, LANES, OUTAGE_S, TASK, QueueUnavailable, _key, _task_fields,
                                  app_for, lease_too_short, opened, shown)
from grader.queue.store import _store


# --- the client -----------------------------------------------------------------------------

def grade_id(data: bytes, name: str, *, exercise: str = exercises.DEFAULT, sandbox: str | None = None,
             time_limit: float | None = None) -> str:
    """The id of a grade: the batch's grading key of the bytes (with the sandbox asked for: None,
    the worker's), with the upload's name (it is in the result, and its suffix says .py or .ipynb)."""
    return keys.upload_key(data, upload_name(name), exercise=exercise, sandbox=sandbox or ANY_SANDBOX,
                           time_limit=time_limit)


def submit(broker: str, data: bytes, name: str, *, exercise: str = exercises.DEFAULT, sandbox: str | None = None,
           time_limit: float | None = None, lane: str = "interactive", outage_s: float = OUTAGE_S) -> str:
    """Enqueue a submission (its bytes and file name) on `lane`; its grade id. `sandbox`: None (the
    default) is graded in whichever sandbox the worker that takes it was started with; a name is a
    request that a worker started with another refuses (an error result). A submission already
    graded under the same id is answered from the store, and one already on its way is not sent twice;
    an `error` result is never kept: that submission is graded again. A Redis that does not answer
    is waited for up to `outage_s` seconds (a batch rides out a restart; a service answering a
    student gives up in seconds), then QueueUnavailable."""
    return _submit(broker, data, name, exercise=exercise, sandbox=sandbox, time_limit=time_limit, lane=lane,
                   outage_s=outage_s)


def _submit(broker: str, data: bytes, name: str, *, exercise: str, sandbox: str | None, time_limit: float | None,
            lane: str, fresh: bool = False, outage_s: float = OUTAGE_S) -> str:
    if lane not in LANES:
        raise ValueError(f"unknown lane {lane!r}; the lanes are {', '.join(LANES)}")
    exercises.get(exercise)  # an unknown exercise fails here, not on a worker
    sandbox = None if sandbox == ANY_SANDBOX else sandbox
    time_limit = None if time_limit is None else float(time_limit)
    short = lease_too_short(courses.time_limit(exercise, time_limit))
    if short:
        raise ValueError(short)
    secret = _key()  # no secret: SecretMissing before anything is sent
    gid = grade_id(data, name, exercise=exercise, sandbox=sandbox, time_limit=time_limit)
    store = _store(broker)
    deadline = time.monotonic() + outage_s
    if fresh:
        store.forget(gid, deadline)
    stored, _, _ = store.look(gid, deadline)
    if stored is not None:
        try:
            if opened(gid, stored).get("status") != Status.ERROR.value:
                return gid
        except signing.BadSignature:
            return gid  # whoever waits for it is told, and the forged result is dropped then
        store.forget(gid, deadline)
    if not store.claim(gid, deadline):
        return gid
    payload = {"id": gid, "data": base64.b64encode(data).decode(), "name": name, "exercise": exercise,
               "sandbox": sandbox, "time_limit": time_limit, "lane": lane}
    payload["sig"] = signing.sign(secret, "task", _task_fields(payload, data))
    try:
        # argsrepr: what Celery's events (Flower) and logs show of the task, not the student's code
        app_for(broker).send_task(TASK, args=[payload], queue=lane, routing_key=lane, retry=True,
                                  argsrepr=f"{name!r} id={gid[:12]} lane={lane}", kwargsrepr="{}",
                                  retry_policy={"max_retries": _retries_within(deadline - time.monotonic()),
                                                "interval_start": 0, "interval_step": 0.5, "interval_max": 2})
    except Exception as err:  # noqa: BLE001  (kombu's errors are many; each means the task was not sent)
        try:
            store.forget(gid, time.monotonic() + 2)
        except QueueUnavailable:
            pass
        raise QueueUnavailable(f"the task could not be sent to {shown(broker)}: {err}") from err
    return gid


def _retries_within(seconds: float) -> int:
    """How many of kombu's retries (after 0, 0.5, 1, 1.5, then every 2 s) fit in `seconds`."""
    retries, waited, pause = 0, 0.0, 0.0
    while waited + pause <= seconds:
        waited, retries, pause = waited + pause, retries + 1, min(pause + 0.5, 2.0)
    return max(0, retries - 1)


def state(broker: str, grade_id: str) -> JobState:
    """Where the grade is: queued, running, done (a result with a score, or a rejection) or failed
    (a result of status error: the grader failed, no score; or a result whose signature did not
    verify). KeyError for an id never submitted."""
    stored, running, queued = _store(broker).look(grade_id)
    if stored is not None:
        try:
            return JobState.FAILED if opened(grade_id, stored).get("status") == Status.ERROR else JobState.DONE
        except signing.BadSignature:
            return JobState.FAILED
    if running:
        return JobState.RUNNING
    if queued:
        return JobState.QUEUED
    raise KeyError(f"no grade {grade_id} in {shown(broker)}")


def result(broker: str, grade_id: str, *, timeout: float | None = None) -> dict:
    """The native result JSON of `grade_id`, once a worker stored it; TimeoutError after `timeout`
    seconds (None: wait as long as it takes), KeyError for an id never submitted, BadSignature for
    a result that was not signed with the queue's secret (it is dropped: a new submit grades again)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        return _wait(broker, grade_id, deadline)
    except QueueUnavailable as err:
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"no result for {grade_id} within {timeout:g} s ({err})") from err
        raise


def _wait(broker: str, gid: str, deadline: float | None, stop: threading.Event | None = None,
          sha256: str | None = None) -> dict:
    delay = 0.05
    while True:
        store = _store(broker)
        stored, running, queued = store.look(gid, deadline)
        if stored is not None:
            try:
                return opened(gid, stored, sha256)
            except signing.BadSignature:
                store.forget(gid)  # never kept: the next submit of these bytes grades them again
                raise
        if not (running or queued):
            raise KeyError(f"no grade {gid} in {shown(broker)}")
        if stop is not None and stop.is_set():
            raise PoolClosed("the batch stopped waiting")
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"no result for {gid} yet")
        time.sleep(delay if left is None else min(delay, left))
        delay = min(delay * 1.5, 1.0)


class QueuePool:
    """What `grade batch --queue` grades with in place of its local Pool: the batch's submissions
    are sent (lane regrade) as the batch starts, and grade(path) waits for that one's result."""
    starts = 0  # no sandbox starts on this machine

    def __init__(self, broker: str, handins: list, *, exercise: str, sandbox: str, wall_s: float | None,
                 fresh: bool = False):
        self.broker, self.exercise, self.sandbox, self.wall_s, self.fresh = broker, exercise, sandbox, wall_s, fresh
        self._ids: dict[Path, str | Exception] = {}
        self._sha256 = {u.path: hashlib.sha256(u.content).hexdigest() for u in handins if u.path is not None}
        self._sent = threading.Condition()
        self._shut = threading.Event()
        threading.Thread(target=self._send_all, args=([u for u in handins if u.path is not None],),
                         daemon=True).start()

    def _send_all(self, handins: list) -> None:
        for handin in handins:
            if self._shut.is_set():
                return
            try:
                gid: str | Exception = _submit(self.broker, handin.content, handin.path.name, exercise=self.exercise,
                                               sandbox=self.sandbox, time_limit=self.wall_s, lane="regrade",
                                               fresh=self.fresh)
            except (QueueUnavailable, ValueError, signing.SecretMissing) as err:
                gid = err
            with self._sent:
                self._ids[handin.path] = gid
                self._sent.notify_all()

    def grade(self, path: Path, *, exercise: str, wall_s: float | None = None, hidden=(), course=None,
              data: bytes | None = None) -> GradeResult:
        """The result of `path` from the queue (`course`: must be None: the workers score with the
        exercise's own points; the CLI refuses --queue with --course)."""
        if course is not None:
            raise ValueError("a queued batch is scored with the exercise's own points: no course file")
        with self._sent:
            while path not in self._ids:
                if self._shut.is_set():
                    raise PoolClosed("the batch stopped")
                self._sent.wait(0.2)
            gid = self._ids[path]
        if isinstance(gid, Exception):
            return grading.error_result(path, str(gid), exercise=exercise, sandbox=self.sandbox)
        try:
            return GradeResult.from_dict(_wait(self.broker, gid, None, self._shut, self._sha256[path]))
        except signing.BadSignature as err:
            return grading.error_result(path, f"not recorded: {err}; it was removed from Redis, and a rerun "
                                        "grades this submission again", exercise=exercise, sandbox=self.sandbox)
        except (QueueUnavailable, KeyError) as err:
            return grading.error_result(path, f"no result from the queue: {err}", exercise=exercise,
                                        sandbox=self.sandbox)

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        """Stop waiting (Ctrl-C). What was sent stays queued and is graded; a rerun collects it."""
        self._shut.set()


