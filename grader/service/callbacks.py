"""Callbacks: a grade's document POSTed to the URL its upload named, once it is finished.

The body is the JSON that GET /v1/grades/ID answers. It is signed with the HMAC-SHA256 of the
exact body bytes under the uploading token's signing secret (printed once by `grade token new`):

    X-Grader-Signature: sha256=<hex digest>
    X-Grader-Grade: <grade id>

A receiver recomputes the digest over the raw body and compares in constant time. A delivery that
fails (no connection, a timeout, any status but 2xx) is retried with back-off: after 1, 2, 4, 8 and
16 seconds, then given up (the result stays readable with GET).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
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


async def deliver(url: str, body: bytes, *, secret: str, grade_id: str,
                  backoff_s: tuple[float, ...] = BACKOFF_S) -> bool:
    """POST `body` to `url` until a 2xx answer, at most 1 + len(backoff_s) times; True if delivered."""
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature(secret, body),
               "X-Grader-Grade": grade_id}
    async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as client:
        for attempt, pause in enumerate((0, *backoff_s)):
            await asyncio.sleep(pause)
            try:
                answer = await client.post(url, content=body, headers=headers)
                if 200 <= answer.status_code < 300:
                    return True
                why = f"status {answer.status_code}"
            except httpx.HTTPError as err:
                why = f"{type(err).__name__}: {err}"
            log.warning("callback for grade %s failed (attempt %d): %s", grade_id, attempt + 1, why)
    return False
