"""Callbacks: a grade's document POSTed to the URL its upload named, once it is finished.

The body is the JSON that GET /v1/grades/ID answers (but its `callback` field). It is signed with the HMAC-SHA256 of the
exact body bytes under the uploading token's signing secret (printed once by `grade token new`):

    X-Grader-Signature: sha256=<hex digest>
    X-Grader-Grade: <grade id>
    X-Grader-Delivery: <delivery id>

The body also carries, inside what is signed, `"delivery": {"id": ..., "timestamp": ...}`: the
delivery's id (the same on every attempt of one callback) and the Unix time of this attempt. A
receiver recomputes the digest over the raw body and compares in constant time, refuses a timestamp
older than a few minutes, and remembers the delivery ids it took, so a captured callback cannot be
replayed (the README shows one). A delivery that fails (no connection, a timeout, any status but
2xx) is retried with back-off: after 1, 2, 4, 8 and 16 seconds, then given up, logged, and shown as
failed in the grade's `callback` (the result stays readable with GET). A callback not yet delivered
when the service stops is sent when it starts again.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

SIGNATURE_HEADER = "X-Grader-Signature"
BACKOFF_S = (1, 2, 4, 8, 16)
TIMEOUT_S = 10.0

log = logging.getLogger("grader.service")


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def valid_url(url: str) -> bool:
    """An absolute http(s) URL with a host: nothing else is ever called."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and len(url) <= 2000


def signed_body(document: dict, delivery_id: str, now: float | None = None) -> bytes:
    """The bytes one attempt sends: the grade's document with the delivery's id and time."""
    return json.dumps({**document, "delivery": {"id": delivery_id, "timestamp": int(now or time.time())}}).encode()


async def deliver(url: str, document: dict, *, secret: str, grade_id: str, delivery_id: str,
                  attempted: Callable[[str | None, bool], None] = lambda error, final: None,
                  backoff_s: tuple[float, ...] = BACKOFF_S) -> bool:
    """POST the document to `url` until a 2xx answer, at most 1 + len(backoff_s) times; True if
    delivered. `attempted(error, final)` hears each attempt (error None: delivered)."""
    async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as client:
        pauses = (0, *backoff_s)
        for attempt, pause in enumerate(pauses):
            await asyncio.sleep(pause)
            body = signed_body(document, delivery_id)
            headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature(secret, body),
                       "X-Grader-Grade": grade_id, "X-Grader-Delivery": delivery_id}
            try:
                answer = await client.post(url, content=body, headers=headers)
                if 200 <= answer.status_code < 300:
                    attempted(None, True)
                    return True
                why = f"status {answer.status_code}"
            except httpx.HTTPError as err:
                why = f"{type(err).__name__}: {err}"
            final = attempt == len(pauses) - 1
            attempted(why, final)
            if final:
                log.error("callback for grade %s given up after %d attempts: %s", grade_id, attempt + 1, why)
            else:
                log.warning("callback for grade %s failed (attempt %d): %s", grade_id, attempt + 1, why)
    return False
