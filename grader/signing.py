"""The queue's secret, and the signatures it puts on what crosses Redis (tasks and results).

Redis carries the queue's tasks and results but is not trusted with them: whoever can write to it
(a second tenant, a leaked password, an open port) could otherwise set any score or inject a task.
Every task a client sends and every result a worker stores carries an HMAC-SHA256 over a canonical
encoding of what it says, made with a secret that the workers and the clients (`grade batch
--queue`, `grade serve --queue`, grader.queue.submit) hold and Redis does not. A task that does not
verify is refused by the worker; a result that does not verify is an error row, never a score.

The secret comes from a file (`--secret-file PATH`, or the environment's GRADER_QUEUE_SECRET_FILE)
or from GRADER_QUEUE_SECRET itself; at least 32 characters (`openssl rand -hex 32 > queue.secret`).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from sandbox.errors import GraderError

SECRET_ENV = "GRADER_QUEUE_SECRET"
SECRET_FILE_ENV = "GRADER_QUEUE_SECRET_FILE"
MIN_LENGTH = 32


class SecretMissing(GraderError):
    """No usable queue secret: a worker or a queued client does not start without one."""


class BadSignature(GraderError):
    """What Redis handed back was not signed with the queue's secret (forged, altered or foreign)."""


def load_secret(path: Path | str | None = None) -> bytes:
    """The queue's secret: from `path`, else the file GRADER_QUEUE_SECRET_FILE names, else
    GRADER_QUEUE_SECRET; surrounding whitespace is not part of it. SecretMissing says what to do."""
    path = path or os.environ.get(SECRET_FILE_ENV) or None
    if path is not None:
        try:
            secret = Path(path).read_bytes().strip()
        except OSError as err:
            raise SecretMissing(f"cannot read the queue's secret file {path}: {err.strerror or err}") from err
        where = f"the secret file {path}"
    else:
        secret = os.environ.get(SECRET_ENV, "").strip().encode()
        where = SECRET_ENV
        if not secret:
            raise SecretMissing(f"the queue needs a secret shared by its workers and clients: give --secret-file "
                                f"PATH or set {SECRET_FILE_ENV} or {SECRET_ENV} (make one with "
                                f"`openssl rand -hex 32 > queue.secret`)")
    if len(secret) < MIN_LENGTH:
        raise SecretMissing(f"the queue's secret in {where} is {len(secret)} characters long; it needs at least "
                            f"{MIN_LENGTH} (`openssl rand -hex 32`)")
    return secret


def canonical(kind: str, fields: dict) -> bytes:
    """One encoding of `fields` whatever their order or spacing; `kind` ("task", "result") keeps a
    signature made for one kind from passing as the other."""
    return json.dumps([kind, fields], sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def sign(secret: bytes, kind: str, fields: dict) -> str:
    return hmac.new(secret, canonical(kind, fields), hashlib.sha256).hexdigest()


def check(secret: bytes, kind: str, fields: dict, signature: object) -> None:
    """BadSignature unless `signature` is sign(secret, kind, fields)."""
    if not isinstance(signature, str) or not hmac.compare_digest(sign(secret, kind, fields), signature):
        raise BadSignature(f"the {kind}'s signature did not verify: it was not written by a holder of the "
                           "queue's secret, or was altered in Redis")
