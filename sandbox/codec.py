"""One codec for the contract's frozen records as they cross a pipe or a file as JSON: a record
becomes a dict of its fields (tuples become lists, enums their values, nested records dicts), and
comes back from such a dict by its own type hints, each value checked against its field's type.
Small and stdlib-only, because the harness and the zygote read it inside the sandbox before any
third-party library is importable there.

    @dataclass(frozen=True)
    class Job(Record):
        name: str
        sizes: tuple[int, ...] = ()

    Job.from_dict(Job("a", (1, 2)).to_dict()) == Job("a", (1, 2))

A missing field takes its default; a field the record does not have, a required field missing or a
value of the wrong type is a CodecError that names the field.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import types
import typing
from typing import Any, TypeVar

from sandbox.errors import GraderError

R = TypeVar("R", bound="Record")
T = TypeVar("T")


class CodecError(GraderError, ValueError):
    """A document that is not the record it is read as; the message names the field."""


def encode(value: Any) -> Any:
    """`value` as JSON's types: records as dicts of their fields, sequences as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any, *, where: str = "") -> T:
    """The record of type `cls` that `data` (a dict, as `encode` made it) describes."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected an object, got {type(data).__name__}")
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = _hints(cls)
    unknown = set(data) - set(hints)
    if unknown:
        raise CodecError(f"{where}: no field {', '.join(sorted(map(repr, unknown)))}")
    values = {name: _as(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    missing = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise CodecError(f"{where}: missing {', '.join(missing)}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:  # the record's own checks (__post_init__)
        raise CodecError(f"{where}: {err}") from err


class Record:
    """A frozen dataclass that reads and writes itself with this codec."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: encode(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        return decode(cls, data)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    return {name: hint for name, hint in typing.get_type_hints(cls).items() if name in init}


def _as(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arm in (a for a in args if a is not type(None)):
            try:
                return _as(arm, value, where)
            except CodecError as err:
                errors.append(str(err))
        raise CodecError("; ".join(errors) or f"{where}: expected a value, got None")
    if origin in (tuple, list, collections.abc.Sequence):
        if not isinstance(value, (list, tuple)):
            raise CodecError(f"{where}: expected a list, got {type(value).__name__}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis) and args:
            if len(args) != len(value):
                raise CodecError(f"{where}: expected {len(args)} items, got {len(value)}")
            return tuple(_as(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        items = [_as(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise CodecError(f"{where}: expected an object, got {type(value).__name__}")
        return dict(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return decode(hint, value, where=where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError as err:
            raise CodecError(f"{where}: {err}") from err
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(hint, type) and (not isinstance(value, hint) or (hint is int and isinstance(value, bool))):
        raise CodecError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
    return value
