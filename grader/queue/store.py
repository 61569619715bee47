"""The grader's own keys in the queue's Redis (see grader.queue): results, who holds what, heartbeats."""
from __future__ import annotations

import os
import time
from typing import cast

import redis


from grader.queue.config import ALIVE_S, KEPT_S, OUTAGE_S, RESEND_S, QueueUnavailable, _apps_lock, lease_s


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

    def claim(self, gid: str, deadline: float | None = None) -> bool:
        """Mark `gid` as on its way; False when it already was, within RESEND_S (a task sent
        longer ago than that and still not done is sent again: it may have been lost)."""
        key, now = f"grader:queued:{gid}", time.time()
        if self.call(lambda r: r.set(key, now, nx=True, ex=KEPT_S), deadline):
            return True
        since = self.call(lambda r: r.get(key), deadline)
        if since is not None and now - float(since) < RESEND_S:
            return False
        self.call(lambda r: r.set(key, now, ex=KEPT_S), deadline)
        return True

    def drop_result(self, gid: str) -> None:
        self.call(lambda r: r.delete(f"grader:result:{gid}"))

    def forget(self, gid: str, deadline: float | None = None) -> None:
        """Drop what is known of `gid`, so that it is graded again (an error, or a forced regrade)."""
        self.call(lambda r: r.delete(*(f"grader:{k}:{gid}" for k in ("result", "queued", "deliveries"))), deadline)

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


WORKERS = "grader:workers"   # sorted set: worker instance -> the time of its last heartbeat


def warm_key(instance: str) -> str:
    """A worker's hash of its warm slots: field "slots" (how many it runs), and one field per worker
    process whose warm sandbox is up (its pid). Kept alive by the worker's heartbeat."""
    return f"grader:warm:{instance}"


_probes: dict[tuple[str, float], redis.Redis] = {}


def workers_seen(broker: str, timeout: float = 2.0) -> list[tuple[str, int, int]]:
    """(instance, slots, warm slots) for each worker whose heartbeat is fresh, asked of Redis once,
    without waiting out an outage: redis.ConnectionError or TimeoutError when it does not answer."""
    with _apps_lock:
        probe = _probes.get((broker, timeout))
        if probe is None:
            probe = _probes[broker, timeout] = redis.Redis.from_url(broker, socket_timeout=timeout,
                                                           socket_connect_timeout=timeout)
    members = cast(list[bytes], probe.zrangebyscore(WORKERS, time.time() - ALIVE_S, "+inf"))
    alive = [m.decode() for m in members]
    pipe = probe.pipeline()
    for instance in alive:
        pipe.hgetall(warm_key(instance))
    seen = []
    for instance, fields in zip(alive, pipe.execute()):
        slots = int(fields.pop(b"slots", b"0") or 0)
        seen.append((instance, slots, min(slots, len(fields))))
    return seen


_stores: dict[tuple[int, str], RedisStore] = {}


def _store(broker: str) -> RedisStore:
    key = (os.getpid(), broker)  # a forked worker process makes its own connections
    with _apps_lock:
        if key not in _stores:
            _stores[key] = RedisStore(broker)
        return _stores[key]


