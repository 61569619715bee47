"""The service's pieces that decide in process: who grades next (fairness.FairQueue, with its own
clock) and where a callback may connect (callbacks.CallbackPolicy, with a resolver that changes
its answer between the upload and the delivery, as a rebinding DNS name does)."""
from __future__ import annotations

import asyncio
import ipaddress

import httpx
import pytest

from grader.service import callbacks
from grader.service.fairness import FairQueue

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_client_that_used_the_least_slot_time_goes_first():
    clock = Clock()
    fair = FairQueue(clock=clock, half_life_s=300)
    fair.add("heavy", "h1")
    assert fair.next(2) == ("heavy", "h1")
    clock.now = 90
    fair.finished("heavy", 90.0)  # held a slot for its whole time limit
    fair.add("heavy", "h2")
    fair.add("light", "l1")       # came after heavy's second upload
    assert fair.next(2) == ("light", "l1")
    assert fair.next(2) == ("heavy", "h2")
    assert fair.next(2) is None   # both slots taken
    # Charges fade: after many half-lives the heavy client counts as new again.
    clock.now += 3000
    assert fair.used("heavy") < 0.1


def test_one_client_never_holds_every_slot_but_takes_them_when_alone_beyond_one():
    fair = FairQueue(clock=Clock())
    for n in range(5):
        fair.add("platform", f"p{n}")
    assert [fair.next(4) for _ in range(4)] == [("platform", "p0"), ("platform", "p1"), ("platform", "p2"), None]
    assert fair.could_start("newcomer", 4)       # the slot kept free is there for whoever comes
    assert not fair.could_start("platform", 4)
    single = FairQueue(clock=Clock())
    single.add("only", "o1")
    assert single.next(1) == ("only", "o1")   # with one slot, its one client may have it


def test_a_vouched_client_alone_may_fill_every_slot_until_another_comes():
    clock = Clock()
    fair = FairQueue(clock=clock, vouched=lambda client: client.startswith("token:"))
    for n in range(4):
        fair.add("token:course", f"c{n}")
    assert [fair.next(2) for _ in range(3)] == [("token:course", "c0"), ("token:course", "c1"), None]
    fair.add("token:other", "o1")   # another platform arrives: it takes the first slot that frees
    clock.now = 10
    fair.finished("token:course", 10.0)
    assert fair.next(2) == ("token:other", "o1")
    fair.finished("token:course", 10.0)
    assert fair.next(2) == ("token:course", "c2")
    assert fair.next(2) is None     # the other was seen lately: the course keeps to all slots but one
    clock.now += 601                 # ...until the other has been gone for ACTIVE_S
    fair.finished("token:other", 1.0)
    clock.now += 601
    assert fair.next(2) == ("token:course", "c3")
    # An anonymous page address never may, alone or not.
    page = FairQueue(clock=Clock(), vouched=lambda client: client.startswith("token:"))
    page.add("page:203.0.113.9", "p1")
    page.add("page:203.0.113.9", "p2")
    assert page.next(2) == ("page:203.0.113.9", "p1") and page.next(2) is None


def test_ties_go_to_the_longest_waiting_and_a_refused_upload_keeps_its_place():
    fair = FairQueue(clock=Clock())
    fair.add("a", "a1")
    fair.add("b", "b1")
    assert fair.next(3) == ("a", "a1")
    fair.finished("a", 0.0)           # the engine refused it: nothing charged...
    fair.add("a", "a1", first=True)   # ...and it is first again in its client's line
    fair.add("a", "a2")
    assert fair.next(3) == ("a", "a1")
    assert fair.next(3) == ("b", "b1")


def _resolver(*answers: str):
    """A resolver that answers each call with the next address (the last one from then on)."""
    calls = []

    async def resolve(host, port):
        calls.append(host)
        return [ipaddress.ip_address(answers[min(len(calls), len(answers)) - 1])]
    resolve.calls = calls
    return resolve


def test_a_name_that_rebinds_to_loopback_after_the_upload_reaches_nothing():
    """At upload the name resolves to a public address (accepted); at delivery to 127.0.0.1: the
    attempt is refused, given up at once, and no connection is made anywhere."""
    policy = callbacks.CallbackPolicy()
    resolve = _resolver("93.184.216.34", "127.0.0.1")
    assert asyncio.run(policy.address("http://rebind.example/hook", resolve)) == ipaddress.ip_address("93.184.216.34")
    heard = []

    async def deliver():
        return await callbacks.deliver("http://rebind.example/hook", {"id": "g"}, secret="s", grade_id="g",
                                       delivery_id="d", attempted=lambda error, final: heard.append((error, final)),
                                       backoff_s=(0.01, 0.01), policy=policy, resolve=resolve)
    assert asyncio.run(deliver()) is False
    assert len(heard) == 1 and heard[0][1] is True and "127.0.0.1 is loopback" in heard[0][0], heard


def test_an_address_the_operator_allowed_is_reached_and_the_request_keeps_its_host():
    policy = callbacks.CallbackPolicy(callbacks.allowed_networks("10.0.0.0/8, 127.0.0.1"))
    assert asyncio.run(policy.address("http://hooks.internal:8080/x", _resolver("10.1.2.3"))) == \
        ipaddress.ip_address("10.1.2.3")
    url, host, extensions = callbacks.pinned("https://hooks.example:8443/x?y=1", ipaddress.ip_address("10.1.2.3"))
    assert url == httpx.URL("https://10.1.2.3:8443/x?y=1")
    assert host == {"Host": "hooks.example:8443"} and extensions == {"sni_hostname": "hooks.example"}
    with pytest.raises(ValueError, match="not an address or a network"):
        callbacks.allowed_networks("10.0.0.0/8,intranet")
    # A name resolving to a public and a private address is refused: either could be dialled.
    with pytest.raises(callbacks.CallbackRefused, match="10.9.9.9 is private"):
        async def both(host, port):
            return [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.9.9.9")]
        asyncio.run(callbacks.CallbackPolicy().address("http://mixed.example/", both))


def test_a_callback_resent_after_a_restart_goes_on_with_its_back_off():
    """Two of its three attempts were made before the service stopped: after the restart only the
    last one is made, and it is the final one (given up), not a fresh round of three."""
    import socket
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/hook"  # nobody listens there
    heard = []
    delivered = asyncio.run(callbacks.deliver(
        url, {"id": "g"}, secret="s", grade_id="g", delivery_id="d", backoff_s=(0.01, 0.01), made=2,
        attempted=lambda error, final: heard.append((error, final)),
        policy=callbacks.CallbackPolicy(callbacks.allowed_networks("127.0.0.1"))))
    assert delivered is False
    assert len(heard) == 1 and heard[0][1] is True and "ConnectError" in heard[0][0], heard
