"""The wire protocol between the trusted harness and the untrusted student worker.

A frame is a fixed 12-byte prefix (header length, payload length), a UTF-8 JSON header and a raw
payload. Tensors travel as raw little-endian bytes described in the header (dtype, shape, offset,
length), so decoding a frame can never run code: nothing is unpickled. Every size is bounded, and
reads take a deadline, so a worker that stalls or floods cannot hang the harness.
"""
from __future__ import annotations

import json
import os
import select
import struct
import time
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported only where a tensor is made or read
    import torch

from sandbox.errors import GraderError

PREFIX = struct.Struct("<IQ")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 64 << 20  # the largest honest answer is well under 1 MiB
TENSOR_KEY = "__tensor__"

# dtype name -> bytes per element; only plain numeric dtypes may cross the wire.
DTYPE_SIZES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
               "int64": 8, "int32": 4, "bool": 1, "uint8": 1}


def bounded(value: object, limit: int = 2000) -> str:
    """Text cut to `limit` characters: what the worker says may be megabytes long (a patched worker
    sends whatever it likes), and it ends up in the report."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + " [...]"


class ProtocolError(GraderError):
    """The peer sent something that is not a valid frame; the worker is treated as broken."""


class PeerClosed(ProtocolError):
    """The peer closed its end of the pipe (it exited or crashed)."""


class Deadline(GraderError):
    """No complete frame arrived before the deadline."""


def encode(message: dict[str, Any]) -> bytes:
    """Encode a message whose values may include torch tensors (nested in dicts and lists)."""
    chunks: list[bytes] = []
    offset = 0

    def walk(value: Any) -> Any:
        nonlocal offset
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if _is_tensor(value):
            raw, dtype, shape = _tensor_bytes(value)
            chunks.append(raw)
            desc = {TENSOR_KEY: dtype, "shape": shape, "offset": offset, "nbytes": len(raw)}
            offset += len(raw)
            return desc
        return value

    header = json.dumps(walk(message), allow_nan=True).encode()
    payload = b"".join(chunks)
    return PREFIX.pack(len(header), len(payload)) + header + payload


def decode(header_bytes: bytes, payload: bytes) -> dict[str, Any]:
    """Decode a frame into a message; tensors come back as fresh torch tensors."""
    try:
        message = json.loads(header_bytes.decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ProtocolError(f"header is not valid JSON: {type(err).__name__}") from err
    if not isinstance(message, dict):
        raise ProtocolError("header is not a JSON object")
    cursor = 0  # tensors must tile the payload in order: no overlap, no reuse, nothing left over

    def walk(value: Any, depth: int) -> Any:
        nonlocal cursor
        if depth > 16:
            raise ProtocolError("message nested too deeply")
        if isinstance(value, dict):
            if TENSOR_KEY in value:
                if value.get("offset") != cursor:
                    raise ProtocolError("tensor bytes out of order")
                tensor = _tensor_from(value, payload)
                cursor += value["nbytes"]
                return tensor
            return {k: walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, depth + 1) for v in value]
        return value

    decoded: dict[str, Any] = walk(message, 0)  # a dict walks to a dict
    if cursor != len(payload):
        raise ProtocolError("payload bytes that no tensor describes")
    return decoded


def send(fd: int, message: dict[str, Any], *, deadline: float | None = None) -> None:
    """Write one frame; with a deadline the fd must be non-blocking, and a peer that stops reading
    raises Deadline instead of blocking the writer forever."""
    data = memoryview(encode(message))
    while data:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                raise Deadline()
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        data = data[written:]


def recv(fd: int, *, deadline: float | None = None) -> dict[str, Any]:
    """Read one frame; raise Deadline if it is not complete by `deadline` (time.monotonic())."""
    prefix = _read_exact(fd, PREFIX.size, deadline)
    header_len, payload_len = PREFIX.unpack(prefix)
    if header_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {header_len} bytes exceeds {MAX_HEADER_BYTES}")
    if payload_len > MAX_PAYLOAD_BYTES:
        raise ProtocolError(f"payload of {payload_len} bytes exceeds {MAX_PAYLOAD_BYTES}")
    header = _read_exact(fd, header_len, deadline)
    payload = _read_exact(fd, payload_len, deadline)
    return decode(header, payload)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    parts: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise Deadline()
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerClosed("the worker closed the pipe")
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def _is_tensor(value: Any) -> bool:
    torch = _torch_if_loaded()
    return torch is not None and isinstance(value, torch.Tensor)


def _torch_if_loaded() -> types.ModuleType | None:
    import sys
    return sys.modules.get("torch")


def _tensor_bytes(tensor: torch.Tensor) -> tuple[bytes, str, list[int]]:
    import torch
    t = tensor.detach().to("cpu").contiguous()
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPE_SIZES:
        raise ProtocolError(f"dtype {dtype} cannot cross the wire")
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return raw, dtype, list(t.shape)


def _tensor_from(desc: dict[str, Any], payload: bytes) -> torch.Tensor:
    import torch
    dtype, shape = desc.get(TENSOR_KEY), desc.get("shape")
    offset, nbytes = desc.get("offset"), desc.get("nbytes")
    if dtype not in DTYPE_SIZES:
        raise ProtocolError(f"unknown dtype {dtype!r}")
    if not (isinstance(shape, list) and len(shape) <= 8
            and all(isinstance(s, int) and 0 <= s < 1 << 31 for s in shape)):
        raise ProtocolError(f"bad tensor shape {shape!r}")
    if not (isinstance(offset, int) and isinstance(nbytes, int)
            and 0 <= offset and 0 <= nbytes and offset + nbytes <= len(payload)):
        raise ProtocolError("tensor bytes out of range")
    count = 1
    for s in shape:
        count *= s
    if count * DTYPE_SIZES[dtype] != nbytes:
        raise ProtocolError(f"tensor of shape {shape} and dtype {dtype} cannot have {nbytes} bytes")
    if nbytes == 0:
        return torch.empty(shape, dtype=getattr(torch, dtype))
    raw = bytearray(payload[offset:offset + nbytes])
    return torch.frombuffer(raw, dtype=getattr(torch, dtype)).reshape(shape)
