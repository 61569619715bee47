"""Who grades next: a fair queue of the service's uploads, charged by the slot time they take.

A client is a token (a platform) or, on the student page, an address. Rate limits count requests;
they cannot see that one upload holds a slot for its whole time limit while another takes two
seconds. So the service sends the engine at most as many grades as it has slots, and when one is
free it picks, among the clients with an upload waiting, the one that has used the least slot time
lately (each grade's seconds, halved every HALF_LIFE_S), the longest waiting first on a tie.

No client holds more than all slots but one (when there are two or more), so that whoever comes
next finds a slot within the time of one grade, however many long uploads another client sent;
with one exception that keeps a service of one platform from idling: a client the service vouches
for (a token, not an anonymous page address) may take every slot while it is the only client seen
in the last ACTIVE_S. Once another comes, the reserve holds again from its next grade.
"""
from __future__ import annotations

import itertools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

HALF_LIFE_S = 300.0
ACTIVE_S = 600.0        # a client that sent or held nothing for this long no longer counts as present
MAX_IDLE_CLIENTS = 10_000


@dataclass
class _Client:
    waiting: deque = field(default_factory=deque)  # (arrival number, key) in the order they came
    running: int = 0
    used: float = 0.0      # slot seconds, decayed to `when`
    when: float = 0.0      # the last time it added, started or finished a grade


class FairQueue:
    """Keys (one per distinct upload) waiting per client; next() says which to grade now."""

    def __init__(self, *, half_life_s: float = HALF_LIFE_S, clock: Callable[[], float] = time.monotonic,
                 vouched: Callable[[str], bool] = lambda client: False):
        self.rate = math.log(2) / half_life_s
        self.clock, self.vouched = clock, vouched
        self._clients: dict[str, _Client] = {}
        self._arrivals = itertools.count()

    def __len__(self) -> int:
        """Keys waiting, all clients together."""
        return sum(len(c.waiting) for c in self._clients.values())

    def running(self) -> int:
        return sum(c.running for c in self._clients.values())

    def add(self, client: str, key: str, *, first: bool = False) -> None:
        """`key` waits for a slot, behind the client's earlier ones (`first`: in front of them)."""
        entry = (-1 if first else next(self._arrivals), key)
        c = self._charged(client)
        c.waiting.appendleft(entry) if first else c.waiting.append(entry)

    def could_start(self, client: str, slots: int) -> bool:
        """Whether an upload of `client` may take a slot now: one is free and the client holds less
        than its share. (Whoever waits then may not take one: the service hands out free slots
        with next() whenever one frees, so a free slot means nobody who may take it waits.)"""
        c = self._clients.get(client)
        return self.running() < slots and (c is None or c.running < self._share(client, slots))

    def start(self, client: str) -> None:
        """A grade of `client` took a slot without waiting (could_start said so)."""
        self._charged(client).running += 1

    def next(self, slots: int) -> tuple[str, str] | None:
        """(client, key) to grade now, counted as running; None when no slot is free or nobody
        who may take one waits."""
        if self.running() >= slots:
            return None
        now = self.clock()
        candidates = [(self._used(c, now), c.waiting[0][0], name) for name, c in self._clients.items()
                      if c.waiting and c.running < self._share(name, slots)]
        if not candidates:
            return None
        name = min(candidates)[2]
        chosen = self._clients[name]
        chosen.running += 1
        return name, chosen.waiting.popleft()[1]

    def finished(self, client: str, slot_seconds: float) -> None:
        """A grade of `client` let its slot go after `slot_seconds`: charged to it."""
        c = self._charged(client, slot_seconds)
        now = c.when
        c.running = max(0, c.running - 1)
        if len(self._clients) > MAX_IDLE_CLIENTS:  # forget idle clients whose charge has almost gone
            self._clients = {n: k for n, k in self._clients.items()
                             if k.running or k.waiting or self._used(k, now) >= 1.0}

    def used(self, client: str) -> float:
        c = self._clients.get(client)
        return 0.0 if c is None else self._used(c, self.clock())

    def _used(self, c: _Client, now: float) -> float:
        return c.used * math.exp(-self.rate * max(0.0, now - c.when))

    def _charged(self, name: str, slot_seconds: float = 0.0) -> _Client:
        """The client `name`, its charge decayed to now and `slot_seconds` added."""
        c, now = self._client(name), self.clock()
        c.used, c.when = self._used(c, now) + max(0.0, slot_seconds), now
        return c

    def _client(self, name: str) -> _Client:
        if name not in self._clients:
            self._clients[name] = _Client(when=self.clock())
        return self._clients[name]

    def _share(self, client: str, slots: int) -> int:
        """The most slots `client` holds at once: all but one when there are two or more, or all
        of them for a vouched client alone (see above)."""
        if self.vouched(client):
            now = self.clock()
            if not any(c.running or c.waiting or now - c.when < ACTIVE_S
                       for name, c in self._clients.items() if name != client):
                return slots
        return max(1, slots - 1)
