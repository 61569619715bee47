"""How `grade serve` listens: uvicorn, with the timeouts a server facing the internet needs.

uvicorn closes a keep-alive connection that stays idle after a response, but it waits without end
for a new connection's first request and for a request body that stops arriving: a few hundred
connections that never finish their headers (slowloris) would hold the service's sockets forever.
GuardedH11 cuts, per connection:

- a request whose headers are not complete HEADER_TIMEOUT_S after the connection opened (or after
  the previous response), however slowly its bytes trickle in;
- a request body that sends nothing for BODY_IDLE_S, or is not complete BODY_TIMEOUT_S after
  its headers (16 MiB at 1 Mbit/s takes about 130 s).

A body is never cut while uvicorn itself has paused reading it (the application is busy with
what it already has). Proxy headers (X-Forwarded-For) are trusted only from the addresses the
operator names; uvicorn's own default trusts 127.0.0.1.
"""
from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
BODY_IDLE_S = 15.0
BODY_TIMEOUT_S = 300.0
WATCH_EVERY_S = 1.0
MAX_CONNECTIONS = 2048  # connections and tasks at once; beyond, uvicorn answers 503

log = logging.getLogger("grader.service")


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a header deadline and body timeouts (see above)."""

    header_timeout_s = HEADER_TIMEOUT_S
    body_idle_s = BODY_IDLE_S
    body_timeout_s = BODY_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        now = self.loop.time()
        self._waiting_since, self._last_data = now, now
        self._body_since: float | None = None
        self._watch = self.loop.call_later(WATCH_EVERY_S, self._check)

    def data_received(self, data: bytes) -> None:
        self._last_data = self.loop.time()
        super().data_received(data)

    def on_response_complete(self) -> None:
        self._waiting_since, self._body_since = self.loop.time(), None  # the next request's deadline starts now
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._watch.cancel()
        super().connection_lost(exc)

    def _check(self) -> None:
        if self.transport.is_closing():
            return
        now, state = self.loop.time(), self.conn.their_state
        why = None
        if state is h11.IDLE:  # no request head yet (a request being answered is DONE, not IDLE)
            if now - self._waiting_since > self.header_timeout_s:
                why = f"no complete request headers within {self.header_timeout_s:g} s"
        elif state is h11.SEND_BODY and not self.flow.read_paused:
            self._body_since = self._body_since or now
            if now - self._last_data > self.body_idle_s:
                why = f"the request body sent nothing for {self.body_idle_s:g} s"
            elif now - self._body_since > self.body_timeout_s:
                why = f"the request body took longer than {self.body_timeout_s:g} s"
        if why:
            log.info("closed a connection from %s: %s", (self.client or ("?",))[0], why)
            self.transport.close()
            return
        self._watch = self.loop.call_later(WATCH_EVERY_S, self._check)


def run(app, *, host: str, port: int, trusted_proxies: list[str]) -> None:
    """Serve `app` until stopped (SIGINT, SIGTERM)."""
    import uvicorn
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on", http=GuardedH11,
                proxy_headers=bool(trusted_proxies), forwarded_allow_ips=trusted_proxies or None,
                limit_concurrency=MAX_CONNECTIONS)
