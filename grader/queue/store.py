"""The grader's own keys in the queue's Redis (see grader.queue): results, who holds what, heartbeats."""
from __future__ import annotations

import os
import time

import redis


from grader.queue.config import KEPT_S, OUTAGE_S, RESEND_S, QueueUnavailable, _apps_lock, lease_s


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


