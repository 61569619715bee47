"""A machine's worker: Celery on the queue's lanes, a warm sandbox per process, the reaper that
puts back what dead workers held, and the task that grades one submission and stores its signed result."""
from __future__ import annotations

import base64
import hashlib
import logging
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import cast

import redis
from celery import shared_task, signals

import exercise as exercises
from grader import course as courses
from grader import grading, signing
from grader.pool import Pool, failed_result, upload_name
from grader.result import GradeResult, points
from sandbox.errors import GraderError
from sandbox.tidy import remove_tree

from grader.queue import config
from grader.queue.config import (ALIVE_S, POISON_ENV, RETRIES, SWEEP_S, TASK, _key, _task_fields, app_for,
                                  lease_too_short, log, longest_limit, opened, seal)
from grader.queue.store import WORKERS, RedisStore, _store, warm_key


# --- the worker -----------------------------------------------------------------------------

_worker_sandbox = grading.DEFAULT_SANDBOX
_worker_instance = ""
_worker_broker = ""
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
    global _worker_sandbox, _worker_instance, _worker_broker
    check_worker()
    name = name or default_name()
    _worker_sandbox, _worker_broker = sandbox, broker
    _worker_instance = f"{name}#{os.getpid()}-{os.urandom(4).hex()}"
    os.environ.update({INSTANCE_ENV: _worker_instance, NAME_ENV: name, QUEUE_ENV: queue_id(broker)})
    reaper = Reaper(broker, _worker_instance, sandbox, slots=slots, name=name)
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
    without a break, so that a Redis that was away does not make live workers look dead.

    The heartbeat also says how many slots the worker runs and how many are warm (grader:warm:<instance>,
    which each worker process fills in once its sandbox is up): what the service's /healthz counts.
    The worker's "ready" line is logged once every slot is warm, when it can grade at once."""
    CONTAINER_SWEEP_S = 30.0

    def __init__(self, broker: str, instance: str, sandbox: str, *, slots: int = 1, name: str = ""):
        super().__init__(name="grade-reaper", daemon=True)
        self.broker, self.instance, self.sandbox = broker, instance, sandbox
        self.slots, self.worker_name, self.announced = slots, name or instance, False
        self.redis = redis.Redis.from_url(broker, socket_timeout=10, socket_connect_timeout=5)
        self._since: float | None = None
        self._containers_swept = 0.0
        # Forget who held a tag only if it still says so: a worker that took the task again since
        # has written its own name there.
        self._release = self.redis.register_script(
            "if redis.call('hget', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('hdel', KEYS[1], ARGV[1]) "
            "end return 0")

    def beat(self) -> None:
        now = time.time()
        pipe = self.redis.pipeline()
        pipe.set(f"grader:alive:{self.instance}", now, ex=ALIVE_S)
        pipe.zadd(WORKERS, {self.instance: now})
        pipe.zremrangebyscore(WORKERS, "-inf", now - 86400)
        pipe.hset(warm_key(self.instance), "slots", self.slots)
        pipe.expire(warm_key(self.instance), ALIVE_S)
        pipe.hlen(warm_key(self.instance))
        warm = min(self.slots, int(pipe.execute()[-1]) - 1)
        if warm >= self.slots and not self.announced:
            self.announced = True
            log.info("worker %s ready: %d warm %s slot(s)", self.worker_name, warm, self.sandbox)

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
        secret = config._secret_path or os.environ.get(signing.SECRET_FILE_ENV)
        _pools[sandbox] = Pool(sandbox, slots=1, hidden=(str(Path(secret).resolve()),) if secret else ())
    return _pools[sandbox]


@signals.worker_process_init.connect
def _warm_up(**_) -> None:
    """Each worker process starts its warm sandbox as it starts (beside: Celery waits only seconds
    for a new process to say it is up), so that the first upload it takes does not wait for it."""
    threading.Thread(target=_warm_and_say, daemon=True).start()


def _warm_and_say() -> None:
    """Start this process's warm sandbox, then record in the worker's warm hash that it is up."""
    if not _pool(_worker_sandbox).warm_up():
        log.error("worker process %d: its %s sandbox did not start; its first grade tries again and reports "
                  "why", os.getpid(), _worker_sandbox)
        return
    if _worker_broker and _worker_instance:
        try:
            _store(_worker_broker).call(lambda r: r.hset(warm_key(_worker_instance), str(os.getpid()), time.time()))
        except Exception as err:  # noqa: BLE001  (only the count /healthz shows is missing)
            log.warning("worker process %d: could not record its warm sandbox: %s", os.getpid(), err)


@signals.worker_process_shutdown.connect
def _close_pools(**_) -> None:
    for pool in _pools.values():
        pool.close()


@signals.after_setup_logger.connect
def _one_line_per_grade(**_) -> None:
    """Celery's own lines for each task (received, succeeded) go; the grader's line says it all."""
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Celery's "NAME ready." comes as soon as it consumes, before any sandbox is warm: the
    # reaper's "worker NAME ready: N warm slot(s)" replaces it.
    logging.getLogger("celery.apps.worker").addFilter(lambda record: record.msg != "%s ready.")


@shared_task(name=TASK, bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
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
        remove_tree(folder)


def _poison_for_tests(data: bytes) -> None:
    poison = os.environ.get(POISON_ENV)
    if poison and hashlib.sha256(data).hexdigest() == poison:
        os._exit(70)


