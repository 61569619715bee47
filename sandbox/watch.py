"""Counting calls to the functions an exercise forbids, from inside the student's process, in a way
the student's code can neither undo nor get around unnoticed.

The count does not travel in the worker's answers (code the student could patch): each call
writes one byte into a pipe of its own, whose other end the harness holds. A byte once written
cannot be taken back, so the harness sees every call, in every test, whatever the worker says.

- A Python function (a torch.nn.functional one, say) is recompiled from its own source with a
  first statement that writes the byte, and the new code replaces the function's `__code__` in
  place: every name, alias, import route, getattr, or module (torch.nn.modules.activation)
  that holds the function holds the counting one, in every thread. No copy that does not count
  is kept.
- A torch operator (a fused native kernel, torch._X) gets
  a CPU kernel, registered in PyTorch's dispatcher, that writes the byte and refuses to run: every
  route to the operator (torch.X, torch.ops.aten.X, torch._C) meets it.
- The writer checks, before and after each write, that its descriptor is still the pipe it was
  given; a closed or replaced one makes the forbidden call raise instead of run.
- An audit hook (which Python offers no way to remove) refuses what would get around the
  counting code - reading or replacing the code or defaults of the counting functions, building
  a function from the watched function's code, re-running or recompiling the watched module,
  tracing (which can jump over a line), the garbage collector's object lists, memory read or
  mapped as objects through ctypes (from_address, string_at) or /proc/*/mem - and writes a tamper
  byte for each attempt.

What the student's code can still do: carry its own copy of the implementation (copied into the
file, or rebuilt from torch's source text under another name), which to the grader is the
student's own code; or write into the process's memory through a foreign function called with raw
addresses (libc's memcpy through ctypes), which could rewrite the counting code itself.
"""
from __future__ import annotations

import os

TAMPER = 0xFF  # the byte for an attempt to get around the count; call bytes are 1 + the index
PLACEHOLDER = "\0sandbox.watch:tally"
# Foreign calls themselves (ctypes.CDLL(None).shmget, say) stay allowed: submissions use them.
GENERIC_TAMPER = frozenset({"sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                            "gc.get_referents", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.string_at",
                            "ctypes.wstring_at"})
SEALED_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


class CountFailed(PermissionError):
    """The call could not be counted (its pipe was closed or replaced), so it does not run."""


def install(paths, fd: int) -> None:
    """Count calls to the functions at these dotted paths into pipe `fd` (byte 1 + their index).
    Must run before the student's code is imported."""
    import sys
    import types
    os.set_blocking(fd, False)  # a pipe the student filled makes the call fail, not hang
    stat = os.fstat(fd)
    tally = _tally_writer(fd, (stat.st_dev, stat.st_ino))
    sealed, files, names = [tally], set(), set()
    for index, path in enumerate(paths):
        target = _resolve(path)
        mark = bytes([index + 1])
        if isinstance(target, types.FunctionType):
            _count_in_place(target, tally, mark)
            sealed.append(target)
            files.add(target.__code__.co_filename)
            names.add(target.__name__)
        else:
            sealed.append(_count_operator(path.rsplit(".", 1)[1], tally, mark))
    sys.addaudithook(_guard(tally, frozenset(id(s) for s in sealed), frozenset(files), frozenset(names)))


def _resolve(path: str):
    import importlib
    module_name, attr = path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), attr)


def _tally_writer(fd: int, identity: tuple):
    """One byte into the pipe, checked to be the pipe before and after. Its references live in
    keyword defaults, which the audit hook lets nobody read or replace."""
    def tally(mark: bytes, *, _fd=fd, _identity=identity, _fstat=os.fstat, _write=os.write,
              _error=CountFailed) -> None:
        before = _fstat(_fd)
        if (before.st_dev, before.st_ino) != _identity:
            raise _error("the grader's call counter was tampered with; this call does not run")
        _write(_fd, mark)
        after = _fstat(_fd)
        if (after.st_dev, after.st_ino) != _identity:
            raise _error("the grader's call counter was tampered with; this call does not run")
    return tally


def _count_in_place(function, tally, mark: bytes) -> None:
    """Give `function` the code of its own source with `tally(mark)` as its first statement."""
    import ast
    import inspect
    import textwrap
    import warnings
    lines, first = inspect.getsourcelines(function)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    definition = tree.body[0]
    definition.decorator_list = []
    count = ast.Expr(ast.Call(ast.Constant(PLACEHOLDER), [ast.Constant(mark)], []))
    definition.body.insert(0, ast.copy_location(count, definition.body[0]))
    ast.increment_lineno(tree, first - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": it is replaced below
        module_code = compile(ast.fix_missing_locations(tree), function.__code__.co_filename, "exec")
    code = next(c for c in module_code.co_consts if getattr(c, "co_name", None) == function.__name__)
    code = code.replace(co_consts=tuple(tally if c == PLACEHOLDER else c for c in code.co_consts))
    function.__code__ = code


def _count_operator(name: str, tally, mark: bytes):
    """A CPU kernel for aten operator `name` that counts the call and refuses to run it. It is
    registered on a raw dispatcher library (not torch.library.Library, whose finalizer anyone can
    find and call to lift the override), kept alive only by the kernel's own keyword defaults."""
    import warnings

    import torch
    handle = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)

    def refuse(*args, _tally=tally, _mark=mark, _name=name, _handle=handle, **kwargs):
        _tally(_mark)
        raise RuntimeError(f"{_name} is one of the built-ins this exercise asks you not to use")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the point
        for key in ("CPU", "NestedTensorCPU"):
            try:
                handle.impl(name, key, refuse, False)
            except RuntimeError:
                pass  # no such operator, or none for this key
    return refuse


def _guard(tally, sealed: frozenset, files: frozenset, names: frozenset):
    """The audit hook: refuses, and counts as tampering, the ways around the counting code."""
    def hook(event: str, args: tuple, *, _tally=tally, _sealed=sealed, _files=files, _names=names,
             _generic=GENERIC_TAMPER, _attrs=SEALED_ATTRIBUTES, _id=id, _isinstance=isinstance,
             _str=str, _bytes=bytes, _error=PermissionError, _getattr=getattr, _mark=bytes([TAMPER])) -> None:
        if event in _generic:
            pass
        elif event in ("object.__getattr__", "object.__setattr__", "object.__delattr__"):
            if not (_id(args[0]) in _sealed and args[1] in _attrs):
                return
        elif event == "function.__new__" or event == "exec":
            code = args[0]
            if _getattr(code, "co_filename", None) not in _files or \
                    (event == "function.__new__" and _getattr(code, "co_name", None) not in _names):
                return
        elif event == "compile":
            source, filename = args[0], args[1]
            text = source.decode("latin-1") if _isinstance(source, _bytes) else source
            if filename not in _files and not (_isinstance(text, _str) and
                                               any("def " + n in text for n in _names)):
                return
        elif event == "open":
            path = args[0]
            if not (_isinstance(path, _str) and path.startswith("/proc/") and path.endswith("/mem")):
                return
        else:
            return
        try:
            _tally(_mark)
        except Exception:
            pass
        raise _error(f"{event}: not allowed while the grader counts calls to forbidden built-ins")
    return hook
