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

Where a callback may go is the operator's decision (CallbackPolicy): an address that is not a public
unicast one (loopback, private, link-local such as a cloud's metadata service, carrier-grade NAT,
multicast, reserved, an IPv4 address inside IPv6) is refused unless it lies in a network the
operator allowed (`grade serve --callback-allow`). The host is resolved when the upload names it
(refused then, 400) and again at each delivery, whose connection goes to the address just checked
(the URL's host stays in the Host header and in TLS's server name): a name that resolves to a
public address at upload and to 127.0.0.1 afterwards reaches nothing.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from grader.errors import GraderError

SIGNATURE_HEADER = "X-Grader-Signature"
BACKOFF_S = (1, 2, 4, 8, 16)
TIMEOUT_S = 10.0
RESOLVE_TIMEOUT_S = 5.0

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

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


class CallbackRefused(GraderError):
    """A callback URL the service will not call: its message says why, in one line."""


def allowed_networks(spec: str) -> tuple[Network, ...]:
    """The networks of `--callback-allow`: addresses or CIDR networks, comma-separated; ValueError
    for one that is neither."""
    networks = []
    for part in (p.strip() for p in spec.split(",")):
        if part:
            try:
                networks.append(ipaddress.ip_network(part, strict=False))
            except ValueError as err:
                raise ValueError(f"{part!r} is not an address or a network (such as 10.0.0.0/8)") from err
    return tuple(networks)


def _kind(ip: Address) -> str | None:
    """Why `ip` is not a public unicast address, or None when it is one."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and ip in ipaddress.ip_network("64:ff9b::/96"):
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            why = _kind(inner)
            return why and f"an IPv6 form of {inner}, {why}"
    for kind in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if ip.is_global else "not public"


@dataclass(frozen=True)
class CallbackPolicy:
    """Where callbacks may go: public unicast addresses, and the networks the operator allowed."""
    allowed: tuple[Network, ...] = ()

    def refusal(self, ip: Address) -> str | None:
        if any(ip in network for network in self.allowed if network.version == ip.version):
            return None
        kind = _kind(ip)
        return kind and f"{ip} is {kind}"

    async def address(self, url: str, resolve: Callable | None = None) -> Address:
        """The address to connect to for `url`: CallbackRefused when the URL is not an absolute
        http(s) one, its host does not resolve, or any address it resolves to is refused."""
        if not valid_url(url):
            raise CallbackRefused("callback_url must be an absolute http or https URL")
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as err:
            raise CallbackRefused(f"callback_url has a bad port: {err}") from err
        try:
            found = await asyncio.wait_for((resolve or _resolve)(host, port), RESOLVE_TIMEOUT_S)
        except (TimeoutError, OSError) as err:
            raise CallbackRefused(f"the callback's host {host!r} does not resolve ({err or 'timed out'})") from err
        addresses = list(dict.fromkeys(found))
        refused = [why for why in map(self.refusal, addresses) if why]
        if refused or not addresses:
            raise CallbackRefused(f"callback_url must reach a public address, and {host!r} "
                                  f"{'resolves to nothing' if not addresses else 'does not: ' + refused[0]} "
                                  "(the operator can allow a network with grade serve --callback-allow)")
        return addresses[0]


async def _resolve(host: str, port: int) -> Iterable[Address]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def pinned(url: str, ip: Address) -> tuple[httpx.URL, dict, dict]:
    """The request for `url` sent to `ip`: (the URL with the address as its host, the Host header,
    the extensions that keep the URL's host as TLS's server name)."""
    original = httpx.URL(url)
    netloc = original.netloc.decode("ascii").rpartition("@")[2]
    extensions = {"sni_hostname": original.host} if original.scheme == "https" else {}
    return original.copy_with(host=str(ip)), {"Host": netloc}, extensions


def signed_body(document: dict, delivery_id: str, now: float | None = None) -> bytes:
    """The bytes one attempt sends: the grade's document with the delivery's id and time."""
    return json.dumps({**document, "delivery": {"id": delivery_id, "timestamp": int(now or time.time())}}).encode()


async def deliver(url: str, document: dict, *, secret: str, grade_id: str, delivery_id: str,
                  attempted: Callable[[str | None, bool], None] = lambda error, final: None,
                  backoff_s: tuple[float, ...] = BACKOFF_S, policy: CallbackPolicy = CallbackPolicy(),
                  resolve: Callable | None = None, made: int = 0) -> bool:
    """POST the document to `url` until a 2xx answer, at most 1 + len(backoff_s) times in all
    (`made`: attempts made before, by a run of the service that stopped; the back-off goes on from
    there); True if delivered. `attempted(error, final)` hears each attempt (error None: delivered).
    Each attempt resolves the host again and connects to the address `policy` allowed; a refused
    one ends it."""
    # trust_env off: no proxy from the environment stands between the check and the connection
    async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False, trust_env=False) as client:
        pauses = (0, *backoff_s)
        for attempt, pause in list(enumerate(pauses))[min(made, len(pauses) - 1):]:
            await asyncio.sleep(pause)
            body = signed_body(document, delivery_id)
            headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature(secret, body),
                       "X-Grader-Grade": grade_id, "X-Grader-Delivery": delivery_id}
            final = attempt == len(pauses) - 1
            try:
                target, host, extensions = pinned(url, await policy.address(url, resolve))
                answer = await client.post(target, content=body, headers={**headers, **host}, extensions=extensions)
                if 200 <= answer.status_code < 300:
                    attempted(None, True)
                    return True
                why = f"status {answer.status_code}"
            except CallbackRefused as err:
                why, final = f"refused: {err}", True
            except httpx.HTTPError as err:
                why = f"{type(err).__name__}: {err}"
            attempted(why, final)
            if final:
                log.error("callback for grade %s given up after %d attempt(s): %s", grade_id, attempt + 1, why)
                return False
            else:
                log.warning("callback for grade %s failed (attempt %d): %s", grade_id, attempt + 1, why)
    return False
