"""Grading on many machines: Celery workers on Redis, and the client that hands them submissions.

    grade worker --broker redis://HOST:6379/0 --slots 2      a machine's worker: 2 warm slots
    grade batch DIR --out OUT --queue redis://HOST:6379/0     a class, graded by the workers

    from grader import queue
    grade_id = queue.submit("redis://HOST:6379/0", data, "submit.py")
    queue.state(broker, grade_id)                   # "queued" | "running" | "done" | "failed"
    queue.result(broker, grade_id, timeout=120)     # the native result JSON, as `grade FILE --json`

One Redis is the broker (Celery's two lanes, `interactive` before `regrade`) and the store of results.
Delivery is at-least-once: a task is acknowledged only after its result is stored (late acks), a task
whose worker process died goes back to its queue (reject on worker lost), and a task whose whole
worker machine died comes back when its lease (the visibility timeout) ends. Effects are idempotent:
the grade id is the batch's grading key (content hash, exercise fingerprint, grader version, sandbox,
time limit) with the upload's name, the result is written once under it, and a task that finds its
result stored grades nothing. The grader's own keys in Redis:

    grader:result:<id>       the native result JSON, written once (SET NX)
    grader:queued:<id>       set by submit (when, as a timestamp) until the result is stored
    grader:running:<id>      the name of the worker grading it; it expires with the lease
    grader:deliveries:<id>   how many times a worker took the task: the poison cap counts these

Celery is imported by this module only: `grade FILE` and a batch without --queue never load it.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import redis
from celery import Celery, signals
from kombu import Exchange, Queue

import exercise as exercises
from grader import grading, keys
from grader.pool import Pool, PoolClosed, upload_name
from grader.result import GradeResult, Status

LANES = ("interactive", "regrade")  # a worker takes from the first lane that has a task
RETRIES = 3                         # a task whose worker dies is graded at most 1 + RETRIES times
TASK = "grader.grade"
KEPT_S = 30 * 86400                 # how long a result stays in the store
DEFAULT_LEASE_S = 3600.0            # the visibility timeout: longer than any grade
LEASE_ENV = "GRADER_VISIBILITY_TIMEOUT"
OUTAGE_S = 300.0                    # how long a client or worker waits for an unreachable Redis
# Test-only: a worker whose environment names a sha256 here exits (os._exit) when it takes a
# submission with those bytes, as a worker does that a grade kills. tests/test_queue.py sets it for
# its own workers to show the poison cap; nothing else sets it.
POISON_ENV = "GRADER_TEST_POISON_SHA256"

log = logging.getLogger("grader.worker")


class QueueUnavailable(ConnectionError):
    """The queue's Redis could not be reached for OUTAGE_S (or the caller's timeout)."""


def lease_s() -> float:
    """The visibility timeout: a task taken and not acknowledged within it is given to another worker."""
    return float(os.environ.get(LEASE_ENV) or DEFAULT_LEASE_S)


def settings(broker: str) -> dict:
    """Celery's configuration, the same for workers and clients: the lease in both places Celery
    reads it, late acks, one task prefetched per process, two lanes taken in order (not round robin)."""
    lease = lease_s()
    return dict(
        broker_url=broker, result_backend=broker, task_ignore_result=True,  # results go to our own keys
        broker_transport_options={"visibility_timeout": lease, "queue_order_strategy": "priority",
                                  # look for tasks of dead workers often enough for a short lease
                                  "unacked_restore_interval": max(1, min(10, int(lease // 10))),
                                  "unacked_restore_throttle": 1},
        result_backend_transport_options={"visibility_timeout": lease},
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        task_serializer="json", accept_content=["json"], result_serializer="json",
        task_queues=[Queue(lane, Exchange(lane, type="direct"), routing_key=lane) for lane in LANES], task_default_queue=LANES[0],
        broker_connection_retry_on_startup=True, broker_connection_max_retries=None,  # ride out a restart
    )


def make_app(broker: str) -> Celery:
    app = Celery("grader", set_as_current=False)
    app.conf.update(settings(broker))
    app.task(name=TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)(_grade_task)
    return app


_apps: dict[str, Celery] = {}
_apps_lock = threading.Lock()


def app_for(broker: str) -> Celery:
    with _apps_lock:
        if broker not in _apps:
            _apps[broker] = make_app(broker)
        return _apps[broker]


# --- the store ------------------------------------------------------------------------------

class Store:
    """The grader's keys in the queue's Redis. Every call rides out a Redis that is restarting."""

    def __init__(self, broker: str):
        self.redis = redis.Redis.from_url(broker, socket_timeout=30, socket_connect_timeout=5,
                                          health_check_interval=30)

    def call(self, fn, deadline: float | None = None):
        """fn(redis client)'s value; on a connection error, again until Redis answers, OUTAGE_S
        passed or `deadline` (time.monotonic) came: then QueueUnavailable."""
        give_up = time.monotonic() + OUTAGE_S if deadline is None else min(deadline, time.monotonic() + OUTAGE_S)
        delay = 0.1
        while True:
            try:
                return fn(self.redis)
            except (redis.ConnectionError, redis.TimeoutError) as err:
                if time.monotonic() + delay > give_up:
                    raise QueueUnavailable(f"the queue's Redis does not answer: {err}") from err
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def look(self, gid: str, deadline: float | None = None) -> tuple[dict | None, bool, bool]:
        """(the stored result, whether a worker is grading it, whether it was submitted)."""
        def read(r):
            pipe = r.pipeline()
            pipe.get(f"grader:result:{gid}").exists(f"grader:running:{gid}").exists(f"grader:queued:{gid}")
            return pipe.execute()
        stored, running, queued = self.call(read, deadline)
        return (json.loads(stored) if stored else None), bool(running), bool(queued)

    def claim(self, gid: str) -> bool:
        """Mark `gid` as on its way; False when it already was, within the lease (a task sent
        longer ago than that and still not done is sent again: it may have been lost)."""
        key, now = f"grader:queued:{gid}", time.time()
        if self.call(lambda r: r.set(key, now, nx=True, ex=KEPT_S)):
            return True
        since = self.call(lambda r: r.get(key))
        if since is not None and now - float(since) < lease_s():
            return False
        self.call(lambda r: r.set(key, now, ex=KEPT_S))
        return True

    def forget(self, gid: str) -> None:
        """Drop what is known of `gid`, so that it is graded again (an error, or a forced regrade)."""
        self.call(lambda r: r.delete(*(f"grader:{k}:{gid}" for k in ("result", "queued", "deliveries"))))

    def delivered(self, gid: str) -> int:
        """Count one more delivery of `gid`'s task; the count so far."""
        def incr(r):
            pipe = r.pipeline()
            pipe.incr(f"grader:deliveries:{gid}").expire(f"grader:deliveries:{gid}", KEPT_S)
            return pipe.execute()[0]
        return self.call(incr)

    def running(self, gid: str, worker: str) -> None:
        self.call(lambda r: r.set(f"grader:running:{gid}", worker, ex=int(lease_s()) + 1))

    def put(self, gid: str, document: dict) -> bool:
        """Store the result, unless one is already there (a redelivered task); True if this one was written."""
        def write(r):
            pipe = r.pipeline()
            pipe.set(f"grader:result:{gid}", json.dumps(document), nx=True, ex=KEPT_S)
            pipe.delete(f"grader:queued:{gid}", f"grader:running:{gid}")
            return pipe.execute()[0]
        return bool(self.call(write))


_stores: dict[tuple[int, str], Store] = {}


def _store(broker: str) -> Store:
    key = (os.getpid(), broker)  # a forked worker process makes its own connections
    with _apps_lock:
        if key not in _stores:
            _stores[key] = Store(broker)
        return _stores[key]


# --- the client -----------------------------------------------------------------------------

def grade_id(data: bytes, name: str, *, exercise: str = exercises.DEFAULT, sandbox: str = grading.DEFAULT_SANDBOX,
             time_limit: float | None = None) -> str:
    """The id of a grade: the batch's grading key of the bytes, with the upload's name (it is in the
    result, and its suffix says .py or .ipynb)."""
    return keys.upload_key(data, upload_name(name), exercise=exercise, sandbox=sandbox, time_limit=time_limit)


def submit(broker: str, data: bytes, name: str, *, exercise: str = exercises.DEFAULT, sandbox: str = "local",
           time_limit: float | None = None, lane: str = "interactive") -> str:
    """Enqueue a submission (its bytes and file name) on `lane`; its grade id. A submission already
    graded under the same id is answered from the store, and one already on its way is not sent twice;
    an `error` result is never kept: that submission is graded again."""
    return _submit(broker, data, name, exercise=exercise, sandbox=sandbox, time_limit=time_limit, lane=lane)


def _submit(broker: str, data: bytes, name: str, *, exercise: str, sandbox: str, time_limit: float | None,
            lane: str, fresh: bool = False) -> str:
    if lane not in LANES:
        raise ValueError(f"unknown lane {lane!r}; the lanes are {', '.join(LANES)}")
    exercises.get(exercise)  # an unknown exercise fails here, not on a worker
    time_limit = None if time_limit is None else float(time_limit)
    longest = exercises.get(exercise).limits.wall_s if time_limit is None else time_limit
    if 2 * longest > lease_s():
        raise ValueError(f"a time limit of {longest:g} s needs a lease ({LEASE_ENV}) of at least twice that; "
                         f"it is {lease_s():g} s")
    gid = grade_id(data, name, exercise=exercise, sandbox=sandbox, time_limit=time_limit)
    store = _store(broker)
    if fresh:
        store.forget(gid)
    stored, _, _ = store.look(gid)
    if stored is not None:
        if stored.get("status") != Status.ERROR.value:
            return gid
        store.forget(gid)
    if not store.claim(gid):
        return gid
    payload = {"id": gid, "data": base64.b64encode(data).decode(), "name": name, "exercise": exercise,
               "sandbox": sandbox, "time_limit": time_limit, "lane": lane}
    try:
        # argsrepr: what Celery's events (Flower) and logs show of the task, not the student's code
        app_for(broker).send_task(TASK, args=[payload], queue=lane, routing_key=lane, retry=True,
                                  argsrepr=f"{name!r} id={gid[:12]} lane={lane}", kwargsrepr="{}",
                                  retry_policy={"max_retries": int(OUTAGE_S // 2), "interval_start": 0,
                                                "interval_step": 0.5, "interval_max": 2})
    except Exception as err:  # noqa: BLE001  (kombu's errors are many; each means the task was not sent)
        try:
            store.forget(gid)
        except QueueUnavailable:
            pass
        raise QueueUnavailable(f"the task could not be sent to {broker}: {err}") from err
    return gid


def state(broker: str, grade_id: str) -> str:
    """Where the grade is: queued, running, done (a result with a score, or a rejection) or failed
    (a result of status error: the grader failed, no score). KeyError for an id never submitted."""
    stored, running, queued = _store(broker).look(grade_id)
    if stored is not None:
        return "failed" if stored.get("status") == Status.ERROR.value else "done"
    if running:
        return "running"
    if queued:
        return "queued"
    raise KeyError(f"no grade {grade_id} in {broker}")


def result(broker: str, grade_id: str, *, timeout: float | None = None) -> dict:
    """The native result JSON of `grade_id`, once a worker stored it; TimeoutError after `timeout`
    seconds (None: wait as long as it takes), KeyError for an id never submitted."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        return _wait(broker, grade_id, deadline)
    except QueueUnavailable as err:
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"no result for {grade_id} within {timeout:g} s ({err})") from err
        raise


def _wait(broker: str, gid: str, deadline: float | None, stop: threading.Event | None = None) -> dict:
    delay = 0.05
    while True:
        stored, running, queued = _store(broker).look(gid, deadline)
        if stored is not None:
            return stored
        if not (running or queued):
            raise KeyError(f"no grade {gid} in {broker}")
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

    def __init__(self, broker: str, units: list, *, exercise: str, sandbox: str, wall_s: float | None,
                 fresh: bool = False):
        self.broker, self.exercise, self.sandbox, self.wall_s, self.fresh = broker, exercise, sandbox, wall_s, fresh
        self._ids: dict[Path, str | Exception] = {}
        self._sent = threading.Condition()
        self._shut = threading.Event()
        threading.Thread(target=self._send_all, args=([u for u in units if u.path is not None],),
                         daemon=True).start()

    def _send_all(self, units: list) -> None:
        for unit in units:
            if self._shut.is_set():
                return
            try:
                gid: str | Exception = _submit(self.broker, unit.content, unit.path.name, exercise=self.exercise,
                                               sandbox=self.sandbox, time_limit=self.wall_s, lane="regrade",
                                               fresh=self.fresh)
            except (QueueUnavailable, ValueError) as err:
                gid = err
            with self._sent:
                self._ids[unit.path] = gid
                self._sent.notify_all()

    def grade(self, path: Path, *, exercise: str, wall_s: float | None = None, hidden=(), course=None) -> GradeResult:
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
            return GradeResult.from_dict(_wait(self.broker, gid, None, self._shut))
        except (QueueUnavailable, KeyError) as err:
            return grading.error_result(path, f"no result from the queue: {err}", exercise=exercise,
                                        sandbox=self.sandbox)

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        """Stop waiting (Ctrl-C). What was sent stays queued and is graded; a rerun collects it."""
        self._shut.set()


# --- the worker -----------------------------------------------------------------------------

_worker_sandbox = grading.DEFAULT_SANDBOX
_pools: dict[str, Pool] = {}


def run_worker(broker: str, *, slots: int, sandbox: str, lanes: list[str], name: str | None = None) -> None:
    """Run a Celery worker on `lanes` (in that order of preference) with `slots` processes, each
    grading one submission at a time in its own warm sandbox; returns when the worker stops."""
    global _worker_sandbox
    _worker_sandbox = sandbox
    app_for(broker).worker_main([
        "worker", "--pool=prefork", f"--concurrency={slots}", f"--queues={','.join(lanes)}", "--loglevel=INFO",
        "--without-gossip", "--without-mingle", "--optimization=fair",
        f"--hostname={name or f'grade{os.getpid()}@%h'}"])


def _pool(sandbox: str) -> Pool:
    """This worker process's warm sandbox of that kind (a process grades one task at a time)."""
    if sandbox not in _pools:
        _pools[sandbox] = Pool(sandbox, slots=1)
    return _pools[sandbox]


@signals.worker_process_init.connect
def _warm_up(**_) -> None:
    """Each worker process starts its warm sandbox as it starts (beside: Celery waits only seconds
    for a new process to say it is up), so that the first upload it takes does not wait for it."""
    threading.Thread(target=_pool(_worker_sandbox).warm_up, daemon=True).start()


@signals.worker_process_shutdown.connect
def _close_pools(**_) -> None:
    for pool in _pools.values():
        pool.close()


@signals.after_setup_logger.connect
def _one_line_per_grade(**_) -> None:
    """Celery's own lines for each task (received, succeeded) go; the grader's line says it all."""
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _grade_task(task, payload: dict) -> None:
    """Grade one submission and store its result, once; the body of the Celery task."""
    gid, name, lane = payload["id"], payload["name"], payload.get("lane", "")
    data = base64.b64decode(payload["data"])
    store = _store(task.app.conf.broker_url)
    if store.look(gid)[0] is not None:
        log.info("grade: %s lane=%s id=%s already graded: kept, not graded again", name, lane, gid[:12])
        return
    attempt = store.delivered(gid)
    if attempt > 1 + RETRIES:
        result_ = _error(data, name, payload, f"not graded: the worker grading it died during each of its "
                         f"{1 + RETRIES} attempts (its process was killed or crashed)")
    else:
        store.running(gid, task.request.hostname or "")
        _poison_for_tests(data)
        try:
            result_ = _pool(payload["sandbox"]).grade_bytes(data, name, exercise=payload["exercise"],
                                                           wall_s=payload.get("time_limit"))
        except Exception as err:  # noqa: BLE001  (a grader fault is an error result, never a lost task)
            result_ = _error(data, name, payload, f"internal error: {type(err).__name__}: {err}")
    from grader import formats
    written = store.put(gid, formats.to_format(result_, "native"))
    score = "-" if result_.score is None else f"{result_.score:g}/{result_.max_score:g}"
    log.info("grade: %s %s score=%s bugs=%s %.1fs attempt=%d lane=%s id=%s%s", result_.status.value, name, score,
             ",".join(b.id for b in result_.bugs) or "-", result_.duration_s, attempt, lane, gid[:12],
             "" if written else " (a result was stored first: kept that one)")


def _error(data: bytes, name: str, payload: dict, message: str) -> GradeResult:
    """An error result (no score) for the submission, with its name and hash."""
    folder = tempfile.mkdtemp(prefix="grade-upload-")
    try:
        path = Path(folder) / upload_name(name)
        path.write_bytes(data)
        return grading.error_result(path, message, exercise=payload["exercise"], sandbox=payload["sandbox"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _poison_for_tests(data: bytes) -> None:
    poison = os.environ.get(POISON_ENV)
    if poison and hashlib.sha256(data).hexdigest() == poison:
        os._exit(70)


# For Celery's own tools: `celery -A grader.queue -b redis://HOST:6379/0 inspect active`.
app = app_for("redis://127.0.0.1:6379/0")
