"""Grading on many machines: Celery workers on Redis, and the client that hands them submissions.

    grade worker --broker redis://HOST:6379/0 --slots 2      a machine's worker: 2 warm slots
    grade batch DIR --out OUT --queue redis://HOST:6379/0     a class, graded by the workers

    from grader import queue
    grade_id = queue.submit("redis://HOST:6379/0", data, "submit.py")
    queue.state(broker, grade_id)                   # "queued" | "running" | "done" | "failed"
    queue.result(broker, grade_id, timeout=120)     # the native result JSON, as `grade FILE --json`

One Redis is the broker (Celery's two lanes, `interactive` before `regrade`) and the store of results.
Redis carries them but is not trusted with them: every task and every result is signed with the
queue's secret (grader.signing), which the workers and the clients hold and Redis does not. A task
that does not verify is refused (an error result, nothing graded); a result that does not verify is
an error for whoever reads it, never a score, and is dropped from Redis so that a rerun grades again.

The operator decides the sandbox: a worker grades in the one it was started with. A task carries
the sandbox its client asks for only as a request (None: whichever the worker has); a worker with
another refuses it with an error result that says so, and every result names the sandbox used.

Delivery is at-least-once: a task is acknowledged only after its result is stored (late acks), a task
whose worker process died goes back to its queue (reject on worker lost), and a task whose whole
worker died (kill -9 of its process group, a machine gone) is put back by a live worker's reaper once
the dead one's heartbeat expires: within ALIVE_S + SWEEP_S seconds of the death (12 s), whatever the
lease. The lease (Redis's visibility timeout, 2 x the longest time limit + LEASE_MARGIN_S) is only the
fallback for a task taken in the instant before its worker recorded that it holds it. Effects are
idempotent: the grade id is the batch's grading key (content hash, exercise fingerprint, grader
version, sandbox asked for, time limit) with the upload's name, the result is written once under
it, and a task that finds its result stored grades nothing. The grader's own keys in Redis:

    grader:result:<id>       the signed result: {"id", "sha256", "sandbox", "result", "sig"}, written once (SET NX)
    grader:queued:<id>       set by submit (when, as a timestamp) until the result is stored
    grader:running:<id>      the name of the worker grading it; it expires with the lease
    grader:deliveries:<id>   how many times a worker took the task: the poison cap counts these
    grader:alive:<instance>  a worker's heartbeat (every SWEEP_S), gone ALIVE_S after it died
    grader:holders           which worker instance holds each of Celery's unacked delivery tags

Celery is imported by this module only: `grade FILE` and a batch without --queue never load it.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import cast

import redis
from celery import Celery, signals
from kombu import Exchange, Queue

import exercise as exercises
from grader import course as courses
from grader import grading, keys, signing
from grader.pool import Pool, PoolClosed, failed_result, upload_name
from grader.result import GradeResult, JobState, Status, points
from sandbox.errors import GraderError

LANES = ("interactive", "regrade")  # a worker takes from the first lane that has a task
RETRIES = 3                         # a task whose worker dies is graded at most 1 + RETRIES times
TASK = "grader.grade"
KEPT_S = 30 * 86400                 # how long a result stays in the store
LEASE_ENV = "GRADER_VISIBILITY_TIMEOUT"
LEASE_MARGIN_S = 60.0               # the lease's room beyond twice the longest time limit
ALIVE_S = 10                        # a heartbeat's life: a worker silent this long is dead
SWEEP_S = 2.0                       # how often a worker beats, and its reaper looks for dead workers' tasks
OUTAGE_S = 300.0                    # how long a client or worker waits for an unreachable Redis
RESEND_S = 3600.0                   # a task submitted this long ago and not done is sent again
ANY_SANDBOX = "worker"              # a task's sandbox request when its client leaves it to the worker
# Test-only: a worker whose environment names a sha256 here exits (os._exit) when it takes a
# submission with those bytes, as a worker does that a grade kills. tests/test_queue.py sets it for
# its own workers to show the poison cap; nothing else sets it.
POISON_ENV = "GRADER_TEST_POISON_SHA256"

log = logging.getLogger("grader.worker")


class QueueUnavailable(GraderError, ConnectionError):
    """The queue's Redis could not be reached for OUTAGE_S (or the caller's timeout)."""


def shown(broker: str) -> str:
    """The Redis URL as messages and logs show it: without its password."""
    return re.sub(r"^(\w+://)([^@/]*)@", lambda m: m[1] + ("***@" if m[2] else "@"), broker)


def longest_limit() -> float:
    """The longest time limit a grade gets by default: the exercises' longest own limit."""
    return max(exercises.get(name).limits.wall_s for name in exercises.all_exercises())


def lease_s() -> float:
    """The visibility timeout: a task taken and not acknowledged within it is given to another
    worker (the fallback to the reaper). GRADER_VISIBILITY_TIMEOUT, else twice the longest
    default time limit and LEASE_MARGIN_S."""
    return float(os.environ.get(LEASE_ENV) or 2 * longest_limit() + LEASE_MARGIN_S)


def lease_too_short(limit: float) -> str | None:
    """Why the lease cannot carry a grade of `limit` seconds (a redelivery while it is graded), or None."""
    if 2 * limit > lease_s():
        return (f"a time limit of {limit:g} s needs a lease ({LEASE_ENV}) of at least twice that; "
                f"it is {lease_s():g} s")
    return None


_secret: bytes | None = None


_secret_path: Path | str | None = None  # the file the secret came from, hidden from every grade


def use_secret(path: Path | str | None = None) -> None:
    """Sign and check with the secret in `path` (else the environment's, grader.signing);
    SecretMissing, saying what to do, when there is none."""
    global _secret, _secret_path
    _secret = signing.load_secret(path)
    _secret_path = path or os.environ.get(signing.SECRET_FILE_ENV)


def _key() -> bytes:
    if _secret is None:
        use_secret()
    assert _secret is not None  # use_secret set it, or raised SecretMissing
    return _secret


def _task_fields(payload: dict, data: bytes) -> dict:
    """What a task's signature covers: all it says, with the bytes as their hash."""
    return {"id": payload["id"], "sha256": hashlib.sha256(data).hexdigest(), "name": payload["name"],
            "exercise": payload["exercise"], "sandbox": payload["sandbox"], "time_limit": payload["time_limit"],
            "lane": payload["lane"]}


def seal(gid: str, sha256: str, sandbox: str, document: dict) -> str:
    """The stored form of a result: it, what it is the result of, and their signature."""
    fields = {"id": gid, "sha256": sha256, "sandbox": sandbox, "result": document}
    return json.dumps({**fields, "sig": signing.sign(_key(), "result", fields)})


def opened(gid: str, stored: bytes | str, sha256: str | None = None) -> dict:
    """The result in a stored envelope, once its signature verified and it is the result of `gid`
    (and of bytes with that `sha256`, when given); else BadSignature."""
    try:
        envelope = json.loads(stored)
        fields = {k: envelope[k] for k in ("id", "sha256", "sandbox", "result")}
        signature = envelope.get("sig")
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise signing.BadSignature("the result's signature did not verify: what Redis holds under its key is "
                                   "not a signed result") from err
    signing.check(_key(), "result", fields, signature)
    if fields["id"] != gid or (sha256 is not None and fields["sha256"] != sha256):
        raise signing.BadSignature("the result's signature did not verify for this submission: Redis holds "
                                   "another submission's signed result under its key")
    return fields["result"]


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

class RedisStore:
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

    def look(self, gid: str, deadline: float | None = None) -> tuple[bytes | None, bool, bool]:
        """(the stored result's envelope as Redis holds it, not yet verified: opened() does; whether
        a worker is grading it; whether it was submitted)."""
        def read(r):
            pipe = r.pipeline()
            pipe.get(f"grader:result:{gid}").exists(f"grader:running:{gid}").exists(f"grader:queued:{gid}")
            return pipe.execute()
        stored, running, queued = self.call(read, deadline)
        return stored, bool(running), bool(queued)

    def claim(self, gid: str) -> bool:
        """Mark `gid` as on its way; False when it already was, within RESEND_S (a task sent
        longer ago than that and still not done is sent again: it may have been lost)."""
        key, now = f"grader:queued:{gid}", time.time()
        if self.call(lambda r: r.set(key, now, nx=True, ex=KEPT_S)):
            return True
        since = self.call(lambda r: r.get(key))
        if since is not None and now - float(since) < RESEND_S:
            return False
        self.call(lambda r: r.set(key, now, ex=KEPT_S))
        return True

    def drop_result(self, gid: str) -> None:
        self.call(lambda r: r.delete(f"grader:result:{gid}"))

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

    def put(self, gid: str, sealed: str) -> bool:
        """Store the sealed result, unless one is already there (a redelivered task); True if this one was written."""
        def write(r):
            pipe = r.pipeline()
            pipe.set(f"grader:result:{gid}", sealed, nx=True, ex=KEPT_S)
            pipe.delete(f"grader:queued:{gid}", f"grader:running:{gid}")
            return pipe.execute()[0]
        return bool(self.call(write))


_stores: dict[tuple[int, str], RedisStore] = {}


def _store(broker: str) -> RedisStore:
    key = (os.getpid(), broker)  # a forked worker process makes its own connections
    with _apps_lock:
        if key not in _stores:
            _stores[key] = RedisStore(broker)
        return _stores[key]


# --- the client -----------------------------------------------------------------------------

def grade_id(data: bytes, name: str, *, exercise: str = exercises.DEFAULT, sandbox: str | None = None,
             time_limit: float | None = None) -> str:
    """The id of a grade: the batch's grading key of the bytes (with the sandbox asked for: None,
    the worker's), with the upload's name (it is in the result, and its suffix says .py or .ipynb)."""
    return keys.upload_key(data, upload_name(name), exercise=exercise, sandbox=sandbox or ANY_SANDBOX,
                           time_limit=time_limit)


def submit(broker: str, data: bytes, name: str, *, exercise: str = exercises.DEFAULT, sandbox: str | None = None,
           time_limit: float | None = None, lane: str = "interactive") -> str:
    """Enqueue a submission (its bytes and file name) on `lane`; its grade id. `sandbox`: None (the
    default) is graded in whichever sandbox the worker that takes it was started with; a name is a
    request that a worker started with another refuses (an error result). A submission already
    graded under the same id is answered from the store, and one already on its way is not sent twice;
    an `error` result is never kept: that submission is graded again."""
    return _submit(broker, data, name, exercise=exercise, sandbox=sandbox, time_limit=time_limit, lane=lane)


def _submit(broker: str, data: bytes, name: str, *, exercise: str, sandbox: str | None, time_limit: float | None,
            lane: str, fresh: bool = False) -> str:
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
    if fresh:
        store.forget(gid)
    stored, _, _ = store.look(gid)
    if stored is not None:
        try:
            if opened(gid, stored).get("status") != Status.ERROR.value:
                return gid
        except signing.BadSignature:
            return gid  # whoever waits for it is told, and the forged result is dropped then
        store.forget(gid)
    if not store.claim(gid):
        return gid
    payload = {"id": gid, "data": base64.b64encode(data).decode(), "name": name, "exercise": exercise,
               "sandbox": sandbox, "time_limit": time_limit, "lane": lane}
    payload["sig"] = signing.sign(secret, "task", _task_fields(payload, data))
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
        raise QueueUnavailable(f"the task could not be sent to {shown(broker)}: {err}") from err
    return gid


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

    def __init__(self, broker: str, units: list, *, exercise: str, sandbox: str, wall_s: float | None,
                 fresh: bool = False):
        self.broker, self.exercise, self.sandbox, self.wall_s, self.fresh = broker, exercise, sandbox, wall_s, fresh
        self._ids: dict[Path, str | Exception] = {}
        self._sha256 = {u.path: hashlib.sha256(u.content).hexdigest() for u in units if u.path is not None}
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
            except (QueueUnavailable, ValueError, signing.SecretMissing) as err:
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


# --- the worker -----------------------------------------------------------------------------

_worker_sandbox = grading.DEFAULT_SANDBOX
_worker_instance = ""
_pools: dict[str, Pool] = {}
INSTANCE_ENV = "GRADER_WORKER_INSTANCE"   # what a worker's warm containers are labelled with
NAME_ENV = "GRADER_WORKER_NAME"
QUEUE_ENV = "GRADER_WORKER_QUEUE"


class WorkerRefused(GraderError):
    """A worker that cannot keep its promises with these settings does not start."""


def default_name() -> str:
    """A worker's name when none is given: one per machine (or per container, whose host name is
    its own), the same after a restart, so that it finds what an earlier run of itself left."""
    return f"grade@{socket.gethostname()}"


def queue_id(broker: str) -> str:
    """Which queue a worker serves, as its warm containers' label says it (not its password)."""
    url = redis.connection.parse_url(broker)
    where = f"{url.get('host', url.get('path', ''))}:{url.get('port', '')}/{url.get('db', 0)}"
    return hashlib.sha256(where.encode()).hexdigest()[:16]


def check_worker(limit: float | None = None) -> None:
    """WorkerRefused, in one line, when the lease cannot carry the longest grade this worker takes
    or there is no secret."""
    short = lease_too_short(longest_limit() if limit is None else limit)
    if short:
        raise WorkerRefused(f"this worker would have its grades redelivered while they run: {short}")
    _key()


def run_worker(broker: str, *, slots: int, sandbox: str, lanes: list[str], name: str | None = None) -> None:
    """Run a Celery worker on `lanes` (in that order of preference) with `slots` processes, each
    grading one submission at a time in its own warm sandbox (the one named here, whatever a task
    asks for); returns when the worker stops. Its reaper (a thread) keeps its heartbeat, puts back
    the tasks of workers that died and removes their warm containers."""
    global _worker_sandbox, _worker_instance
    check_worker()
    name = name or default_name()
    _worker_sandbox = sandbox
    _worker_instance = f"{name}#{os.getpid()}-{os.urandom(4).hex()}"
    os.environ.update({INSTANCE_ENV: _worker_instance, NAME_ENV: name, QUEUE_ENV: queue_id(broker)})
    reaper = Reaper(broker, _worker_instance, sandbox)
    try:
        reaper.beat()  # alive before any warm container is labelled with it
        if sandbox == "docker":
            reaper.remove_dead_containers()  # what an earlier run of this worker (or another, gone) left
    except Exception as err:  # noqa: BLE001  (Redis or the engine away: the reaper's sweeps try again)
        log.warning("reaper: the first sweep failed (%s); it tries again every %g s", err, SWEEP_S)
    reaper.start()
    app_for(broker).worker_main([
        "worker", "--pool=prefork", f"--concurrency={slots}", f"--queues={','.join(lanes)}", "--loglevel=INFO",
        "--without-gossip", "--without-mingle", "--optimization=fair", f"--hostname={name}"])


class Reaper(threading.Thread):
    """A worker's heartbeat, and what it does for workers whose heartbeat stopped: every SWEEP_S
    it puts back on their queue the tasks they held (Celery's unacked delivery tags, recorded in
    grader:holders as each task is received) and, every CONTAINER_SWEEP_S, removes the warm
    containers labelled with them. It acts only after its own heartbeat went through for ALIVE_S
    without a break, so that a Redis that was away does not make live workers look dead."""
    CONTAINER_SWEEP_S = 30.0

    def __init__(self, broker: str, instance: str, sandbox: str):
        super().__init__(name="grade-reaper", daemon=True)
        self.broker, self.instance, self.sandbox = broker, instance, sandbox
        self.redis = redis.Redis.from_url(broker, socket_timeout=10, socket_connect_timeout=5)
        self._since: float | None = None
        self._containers_swept = 0.0
        # Forget who held a tag only if it still says so: a worker that took the task again since
        # has written its own name there.
        self._release = self.redis.register_script(
            "if redis.call('hget', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('hdel', KEYS[1], ARGV[1]) "
            "end return 0")

    def beat(self) -> None:
        self.redis.set(f"grader:alive:{self.instance}", time.time(), ex=ALIVE_S)

    def run(self) -> None:
        while True:
            try:
                self.beat()
                now = time.monotonic()
                self._since = self._since or now
                if now - self._since >= ALIVE_S:
                    self.restore_dead()
                    if self.sandbox == "docker" and now - self._containers_swept >= self.CONTAINER_SWEEP_S:
                        self._containers_swept = now
                        self.remove_dead_containers()
            except (redis.ConnectionError, redis.TimeoutError):
                self._since = None
            except Exception:  # noqa: BLE001  (the reaper must outlive a bad sweep)
                log.exception("reaper: a sweep failed")
            time.sleep(SWEEP_S)

    def alive(self, instance: str) -> bool:
        return instance == self.instance or bool(self.redis.exists(f"grader:alive:{instance}"))

    def restore_dead(self) -> None:
        # a client without decode_responses: redis answers bytes
        holders = {tag.decode(): who.decode() for tag, who in cast(dict[bytes, bytes], self.redis.hgetall(HOLDERS)).items()}
        if not holders:
            return
        with app_for(self.broker).connection_for_write() as conn:
            channel = conn.default_channel
            unacked = {tag.decode() for tag in cast(list[bytes], self.redis.hkeys(channel.unacked_key))}
            for tag, who in holders.items():
                if tag not in unacked:  # acknowledged (or already put back): nobody holds it now
                    self._release(keys=[HOLDERS], args=[tag, who])
                elif not self.alive(who):
                    # Released first: the tag is the same when the task is taken again, by its new holder.
                    self._release(keys=[HOLDERS], args=[tag, who])
                    channel.qos.restore_by_tag(tag, leftmost=True)
                    log.warning("reaper: put a task of %s back on its queue (its heartbeat stopped %d s ago or more)",
                                who.split("#")[0], ALIVE_S)

    def remove_dead_containers(self) -> None:
        from sandbox import docker as dockers
        for container, instance in dockers.remove_warm_of_dead(os.environ[QUEUE_ENV], self.alive):
            # every container of that queue labelled with an instance whose heartbeat is gone
            log.warning("reaper: removed warm container %s of %s, a worker that is gone", container,
                        instance.split("#")[0])


HOLDERS = "grader:holders"


@signals.task_received.connect
def _hold(request=None, **_) -> None:
    """Record, as the worker receives a task, that this worker holds its delivery tag: should the
    whole worker die, a live one's reaper puts the task back (Reaper.restore_dead)."""
    tag = getattr(getattr(request, "message", None), "delivery_tag", None)
    if tag and _worker_instance:
        _store(request.task.app.conf.broker_url).call(lambda r: r.hset(HOLDERS, tag, _worker_instance))


def _pool(sandbox: str) -> Pool:
    """This worker process's warm sandbox of that kind (a process grades one task at a time)."""
    if sandbox not in _pools:  # the queue's secret file is the worker's: no submission reads it
        secret = _secret_path or os.environ.get(signing.SECRET_FILE_ENV)
        _pools[sandbox] = Pool(sandbox, slots=1, hidden=(str(Path(secret).resolve()),) if secret else ())
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
    """Grade one submission and store its signed result, once; the body of the Celery task. A task
    whose signature does not verify is refused: an error result (if its id has none yet), no grade."""
    store = _store(task.app.conf.broker_url)
    try:
        gid, name, lane = str(payload["id"]), str(payload["name"]), str(payload.get("lane", ""))
        data = base64.b64decode(payload["data"], validate=True)
        signing.check(_key(), "task", _task_fields(payload, data), payload.get("sig"))
        exercises.get(payload["exercise"])
    except (signing.BadSignature, KeyError, TypeError, ValueError) as err:
        _refuse(store, payload, err)
        return
    stored = store.look(gid)[0]
    if stored is not None:
        try:
            opened(gid, stored)
            log.info("grade: %s lane=%s id=%s already graded: kept, not graded again", name, lane, gid[:12])
            return
        except signing.BadSignature:
            log.warning("grade: %s id=%s: Redis held a result that did not verify under its key: dropped, "
                        "graded now", name, gid[:12])
            store.drop_result(gid)
    attempt = store.delivered(gid)
    asked, limit = payload.get("sandbox"), payload.get("time_limit")
    short = lease_too_short(courses.time_limit(payload["exercise"], limit))
    if asked not in (None, _worker_sandbox):
        result_ = _error(data, name, payload, f"refused: this worker grades in the {_worker_sandbox} sandbox its "
                         f"operator started it with, and the task asked for the {asked} sandbox (a client does "
                         "not choose the sandbox: leave out --sandbox, or send it to workers started with "
                         f"--sandbox {asked})")
    elif short:
        result_ = _error(data, name, payload, f"refused by this worker: {short}")
    elif attempt > 1 + RETRIES:
        result_ = _error(data, name, payload, f"not graded: the worker grading it died during each of its "
                         f"{1 + RETRIES} attempts (its process was killed or crashed)")
    else:
        store.running(gid, task.request.hostname or "")
        _poison_for_tests(data)
        try:
            result_ = _pool(_worker_sandbox).grade_bytes(data, name, exercise=payload["exercise"],
                                                        wall_s=None if limit is None else float(limit))
        except Exception as err:  # noqa: BLE001  (a grader fault is an error result, never a lost task)
            result_ = _error(data, name, payload, f"internal error: {type(err).__name__}: {err}")
    from grader import formats
    written = store.put(gid, seal(gid, hashlib.sha256(data).hexdigest(), _worker_sandbox,
                                  formats.to_format(result_, "native")))
    score = "-" if result_.score is None else f"{points(result_.score)}/{points(result_.max_score)}"
    log.info("grade: %s %s score=%s bugs=%s %.1fs attempt=%d lane=%s id=%s%s", result_.status.value, name, score,
             ",".join(b.id for b in result_.bugs) or "-", result_.duration_s, attempt, lane, gid[:12],
             "" if written else " (a result was stored first: kept that one)")


def _refuse(store: RedisStore, payload, why: Exception) -> None:
    """A task that is not what a client holding the secret sent: nothing of it runs. Its id, when it
    names one, gets an error result (never over a stored one) so that a client waiting for it hears."""
    gid = payload.get("id") if isinstance(payload, dict) else None
    name = payload.get("name") if isinstance(payload, dict) else None
    log.warning("refused: a task%s%s: %s; not graded", f" for {name!r}" if isinstance(name, str) else "",
                f" id={gid[:12]}" if isinstance(gid, str) else "", why)
    if isinstance(gid, str) and len(gid) == 64 and all(c in "0123456789abcdef" for c in gid):
        document = failed_result(str(name or "submission.py"), f"refused by the worker: {why}",
                                 exercise=exercises.DEFAULT, sandbox=_worker_sandbox)
        store.put(gid, seal(gid, "", _worker_sandbox, document))


def _error(data: bytes, name: str, payload: dict, message: str) -> GradeResult:
    """An error result (no score) for the submission, with its name and hash."""
    folder = tempfile.mkdtemp(prefix="grade-upload-")
    try:
        path = Path(folder) / upload_name(name)
        path.write_bytes(data)
        return grading.error_result(path, message, exercise=payload["exercise"], sandbox=_worker_sandbox)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _poison_for_tests(data: bytes) -> None:
    poison = os.environ.get(POISON_ENV)
    if poison and hashlib.sha256(data).hexdigest() == poison:
        os._exit(70)


# For Celery's own tools: `celery -A grader.queue -b redis://HOST:6379/0 inspect active`.
app = app_for("redis://127.0.0.1:6379/0")
