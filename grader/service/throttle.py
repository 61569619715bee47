"""The service's limits: requests per token or per address (a token bucket each), and the size of
a request body, enforced as it arrives rather than after it was read."""
from __future__ import annotations

import threading
import time


class RateLimiter:
    """A token bucket per client: `per_minute` requests a minute, in bursts of up to `per_minute`."""

    def __init__(self, per_minute: float, *, max_clients: int = 100_000):
        self.capacity = max(1.0, float(per_minute))
        self.refill_per_s = float(per_minute) / 60.0
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens left, when)
        self._lock = threading.Lock()

    def allow(self, client: str) -> float:
        """0 when `client` may make a request now (and it is counted); else the seconds to wait."""
        now = time.monotonic()
        with self._lock:
            left, then = self._buckets.get(client, (self.capacity, now))
            left = min(self.capacity, left + (now - then) * self.refill_per_s)
            if left >= 1.0:
                self._buckets[client] = (left - 1.0, now)
                self._forget_full(now)
                return 0.0
            self._buckets[client] = (left, now)
            return (1.0 - left) / self.refill_per_s if self.refill_per_s else 60.0

    def _forget_full(self, now: float) -> None:
        """Bound the memory: past max_clients, drop the buckets that have refilled (they start full)."""
        if len(self._buckets) <= self.max_clients:
            return
        full_after = self.capacity / self.refill_per_s if self.refill_per_s else float("inf")
        self._buckets = {c: (n, t) for c, (n, t) in self._buckets.items() if now - t < full_after}


class BodyLimit:
    """ASGI wrapper: a request whose body is over `max_bytes` is answered 413 before it is read
    whole: at once when its Content-Length says so, else as soon as the bytes received pass the
    limit (a chunked upload). The application then sees the client gone, and whatever it still
    sends is dropped. `answer(scope, send, max_bytes)` writes the 413 (the service's words for a
    program or for the student page)."""

    def __init__(self, app, max_bytes: int, answer):
        self.app, self.max_bytes, self.answer = app, max_bytes, answer

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            return await self.answer(scope, send, self.max_bytes)
        seen, answered, started = 0, False, False

        async def counted_receive():
            nonlocal seen, answered
            if answered:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    answered = True
                    if not started:
                        await self.answer(scope, send, self.max_bytes)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            nonlocal started
            if answered:
                return
            started = True
            await send(message)

        await self.app(scope, counted_receive, guarded_send)
