"""The queue's settings, shared by its clients and workers: the lanes and timings, the lease,
the secret every task and result is signed with, and Celery's configuration."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from pathlib import Path

from celery import Celery
from kombu import Exchange, Queue

import exercise as exercises
from grader import signing
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
    return app


_apps: dict[str, Celery] = {}
_apps_lock = threading.Lock()


def app_for(broker: str) -> Celery:
    with _apps_lock:
        if broker not in _apps:
            _apps[broker] = make_app(broker)
        return _apps[broker]


