"""The wire protocol: tensors round-trip exactly, and nothing malformed is ever accepted; the
contract's records (sandbox.codec) come back as they left, and a document of the wrong shape is
refused by the field it gets wrong."""
import dataclasses
import json
import os
import struct
import time

import pytest
import torch

import exercise as exercises
from sandbox import protocol
from sandbox.codec import CodecError
from sandbox.contract import Entry, HarnessJob, Method, ZygoteHandoff
from sandbox.limits import Limits

pytestmark = pytest.mark.unit  # the whole module runs in this process (the fast lane)


def roundtrip(message):
    frame = protocol.encode(message)
    header_len, payload_len = protocol.PREFIX.unpack(frame[:protocol.PREFIX.size])
    header = frame[protocol.PREFIX.size:protocol.PREFIX.size + header_len]
    return protocol.decode(header, frame[protocol.PREFIX.size + header_len:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.bool, torch.int64])
def test_tensors_roundtrip_bit_exact(dtype):
    t = (torch.randn(3, 4, 5) * 10).to(dtype)
    back = roundtrip({"x": t, "nested": [{"y": t[1:, ::2]}], "n": 3})
    assert back["n"] == 3
    assert back["x"].dtype == dtype and torch.equal(back["x"], t)
    assert torch.equal(back["nested"][0]["y"], t[1:, ::2])


def test_nan_and_empty_tensors_survive():
    t = torch.tensor([float("nan"), float("inf"), -0.0])
    back = roundtrip({"t": t, "e": torch.empty(0, 3)})
    assert torch.isnan(back["t"][0]) and back["t"][1] == float("inf")
    assert back["e"].shape == (0, 3)


@pytest.mark.parametrize("desc,why", [
    ({"__tensor__": "object", "shape": [1], "offset": 0, "nbytes": 8}, "unknown dtype"),
    ({"__tensor__": "float64", "shape": [2], "offset": 0, "nbytes": 8}, "cannot have"),
    ({"__tensor__": "float64", "shape": [1], "offset": 4, "nbytes": 8}, "out of order"),
    ({"__tensor__": "float64", "shape": [-1], "offset": 0, "nbytes": 8}, "bad tensor shape"),
])
def test_malformed_tensor_descriptions_are_refused(desc, why):
    import json
    with pytest.raises(protocol.ProtocolError, match=why):
        protocol.decode(json.dumps({"x": desc}).encode(), b"\0" * 8)


def test_header_that_is_not_json_is_refused():
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(b"\x80\x04pickle", b"")


def test_oversized_frame_is_refused_before_reading_it():
    r, w = os.pipe()
    os.write(w, struct.pack("<IQ", protocol.MAX_HEADER_BYTES + 1, 0))
    with pytest.raises(protocol.ProtocolError, match="exceeds"):
        protocol.recv(r, deadline=time.monotonic() + 1)
    os.close(r), os.close(w)


def test_recv_gives_up_at_the_deadline_and_reports_a_closed_peer():
    r, w = os.pipe()
    os.write(w, protocol.encode({"a": 1})[:5])     # half a frame, then silence
    started = time.monotonic()
    with pytest.raises(protocol.Deadline):
        protocol.recv(r, deadline=time.monotonic() + 0.3)
    assert time.monotonic() - started < 2
    os.close(w)
    with pytest.raises(protocol.PeerClosed):
        protocol.recv(r, deadline=time.monotonic() + 1)
    os.close(r)


def test_tensors_may_not_overlap_repeat_or_leave_bytes_over():
    import json
    one = {"__tensor__": "float64", "shape": [1], "offset": 0, "nbytes": 8}
    with pytest.raises(protocol.ProtocolError, match="out of order"):     # the same bytes twice
        protocol.decode(json.dumps({"a": one, "b": one}).encode(), b"\0" * 16)
    with pytest.raises(protocol.ProtocolError, match="no tensor describes"):
        protocol.decode(json.dumps({"a": one}).encode(), b"\0" * 16)


def test_deeply_nested_headers_are_refused():
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(b"[" * 200_000, b"")
    with pytest.raises(protocol.ProtocolError, match="nested"):
        protocol.decode(("{\"a\": " * 40 + "1" + "}" * 40).encode(), b"")


def test_send_gives_up_when_the_reader_stops_reading():
    r, w = os.pipe()
    os.set_blocking(w, False)
    big = {"x": torch.zeros(1 << 18)}          # 2 MiB: more than a pipe holds
    with pytest.raises(protocol.Deadline):
        protocol.send(w, big, deadline=time.monotonic() + 0.3)
    os.close(r), os.close(w)


# --- the contract's records, through sandbox.codec ------------------------------------------------

def test_every_exercises_job_crosses_the_pipe_unchanged():
    """What the host sends the harness (the job, its entry, its limits, a zygote handed over) is the
    same record on the other side of JSON: a field lost or re-typed would grade under other rules."""
    for ex in exercises.all_exercises().values():
        job = ex.job(dataclasses.replace(ex.limits, wall_s=33.5, audit=False), [[1, 2, 0], [3, 4, 1]], ("/x",),
                     seed="seed").at("/tmp/a.py", scratch="/tmp/s", zygote=ZygoteHandoff(7, True, ("n",), True))
        back = HarnessJob.from_dict(json.loads(json.dumps(job.to_dict())))
        assert back.line_map == ((1, 2, 0), (3, 4, 1))
        assert dataclasses.replace(back, line_map=job.line_map) == job, ex.name


@pytest.mark.parametrize("doc, why", [
    ({"wall_s": "90"}, "Limits.wall_s: expected float, got str"),
    ({"audit": 1}, "Limits.audit: expected bool, got int"),
    ({"max_timeouts": True}, "Limits.max_timeouts: expected int, got bool"),
    ({"wal_s": 90}, "Limits: no field 'wal_s'"),
])
def test_a_limits_document_of_the_wrong_shape_is_refused_by_field(doc, why):
    with pytest.raises(CodecError) as err:
        Limits.from_dict(doc)
    assert str(err.value) == why
    assert Limits.from_dict({}) == Limits() and Limits.from_dict({"wall_s": 30}).wall_s == 30.0


def test_an_entry_document_is_checked_as_the_entry_is():
    entry = Entry.a_class("M", ("d",), Method("forward", ("x", "mask"), 1), contexts=(("c", "expr"),))
    assert Entry.from_dict(entry.to_dict()) == entry
    with pytest.raises(CodecError, match="Entry: missing name"):
        Entry.from_dict({"kind": "class"})
    with pytest.raises(CodecError, match="not 'module'"):
        Entry.from_dict({"kind": "module", "name": "M"})
    with pytest.raises(CodecError, match=r"Entry.methods\[0\].args: expected a list"):
        Entry.from_dict({**entry.to_dict(), "methods": [{"name": "forward", "args": "x"}]})
    with pytest.raises(CodecError, match=r"Entry.contexts\[0\]: expected 2 items"):
        Entry.from_dict({**entry.to_dict(), "contexts": [["c"]]})
