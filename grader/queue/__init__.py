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
    grader:workers           every worker instance by the time of its last heartbeat (what /healthz reads)
    grader:warm:<instance>   its slots ("slots") and one field per worker process whose sandbox is warm
    grader:holders           which worker instance holds each of Celery's unacked delivery tags

The package: config.py (lanes, timings, the lease, the secret, Celery's configuration), store.py
(the keys above), client.py (submit, state, result, and the pool a batch grades through) and
worker.py (the Celery worker, its reaper and the task). Celery is imported by this package only:
`grade FILE` and a batch without --queue never load it.
"""
from __future__ import annotations

from grader import signing
from grader.queue.client import QueuePool, grade_id, result, state, submit
from grader.queue.config import (
    ALIVE_S,
    ANY_SANDBOX,
    KEPT_S,
    LANES,
    LEASE_ENV,
    LEASE_MARGIN_S,
    OUTAGE_S,
    POISON_ENV,
    RESEND_S,
    RETRIES,
    SWEEP_S,
    TASK,
    QueueUnavailable,
    _task_fields,
    app_for,
    lease_s,
    lease_too_short,
    longest_limit,
    opened,
    seal,
    settings,
    shown,
    use_secret,
)
from grader.queue.store import RedisStore, workers_seen
from grader.queue.worker import (
    INSTANCE_ENV,
    NAME_ENV,
    QUEUE_ENV,
    Reaper,
    WorkerRefused,
    check_worker,
    default_name,
    queue_id,
    run_worker,
)

__all__ = ["ALIVE_S", "ANY_SANDBOX", "INSTANCE_ENV", "KEPT_S", "LANES", "LEASE_ENV", "LEASE_MARGIN_S", "NAME_ENV",
           "OUTAGE_S", "POISON_ENV", "QUEUE_ENV", "RESEND_S", "RETRIES", "SWEEP_S", "TASK", "QueuePool",
           "QueueUnavailable", "Reaper", "RedisStore", "WorkerRefused", "_task_fields", "app", "app_for",
           "check_worker", "default_name", "grade_id", "lease_s", "lease_too_short", "longest_limit", "opened",
           "queue_id", "result", "run_worker", "seal", "settings", "shown", "signing", "state", "submit",
           "use_secret", "workers_seen"]

# For Celery's own tools: `celery -A grader.queue -b redis://HOST:6379/0 inspect active`.
app = app_for("redis://127.0.0.1:6379/0")
