"""The student worker: imports the submission and answers the harness's requests over pipes.

Everything here runs in a process the student controls, so nothing it says is trusted: the
harness decodes its answers without unpickling, bounds every read, and checks what it can.
The requests are generic (build an instance of the entry class, or take the entry function; set
parameters, call it, run a backward pass): this file knows nothing about any exercise. What to look
for in the submission comes from the exercise's Entry (sandbox.contract).
"""
from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import types
from typing import Any

from sandbox import protocol
from sandbox.contract import CLASS, Entry

SUBMISSION_MODULE = "submission"


def _text(value: object) -> str:
    try:
        text = str(value)
    except BaseException:  # a student's __str__ may raise anything
        text = "<unprintable>"
    return protocol.bounded(text)


def describe_exception(err: BaseException, path: str) -> dict:
    """Type, message and the innermost line of the student's file that was running."""
    where, tb = None, err.__traceback__
    while tb is not None:  # read here, not by traceback.walk_tb: the audit hook hands frames to no one else
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == path:
            where = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(err, SyntaxError) and os.path.abspath(err.filename or "") == path:
        where = err.lineno
    return {"type": type(err).__name__, "message": _text(err), "line": where}


class Worker:
    """Serves requests for one submission until the harness closes the pipe."""

    def __init__(self, path: str, spec: Entry, tally_fd: int | None = None, audit: bool = True):
        self.path = os.path.abspath(path)
        self.audit = audit  # False: the kernel's layers alone (sandbox.limits.Limits.audit)
        self.spec = spec
        self.tally_fd = tally_fd  # the pipe each refusal is counted into (audit.py)
        self.entry: Any = None  # the student's class or function
        self.modules: dict[int, object] = {}
        self.contexts: dict[str, types.CodeType] = {}  # the entry's contexts, compiled before the hook is in
        self.here = self.path  # the name the submission is imported by (prepare)

    # -- loading -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """The grader's own set-up, before any of the student's code runs: what fails here is the
        grader's to fix (the worker ends before it says 'importing'), never the student's."""
        # compiled now: once the audit hook is in, only the submission's own text compiles
        self.contexts = {name: compile(text, f"<context {name}>", "eval") for name, text in self.spec.contexts}
        # By its name in the working folder where it lies there: the folders above it may be closed
        # to the student's uid (sandbox.confine.become_student).
        self.here = os.path.basename(self.path) if os.path.dirname(self.path) == os.getcwd() else self.path
        if self.audit:
            from sandbox import audit
            audit.install(self.spec.refuse, self.tally_fd, self.path, readable_as=self.here)
        # Taken before the student's code runs: patching Worker's methods or the module's own
        # parameters()/numel() afterwards changes neither what is dispatched nor what is counted.
        from sandbox import measure
        self.ops = {name[3:]: getattr(self, name) for name in dir(type(self)) if name.startswith("op_")}
        self.parameters = measure.walker()

    def load(self) -> dict:
        """Import the submission and check the entry class (prepare() ran); the answer is the
        'ready' message."""
        here = self.here
        loader = importlib.machinery.SourceFileLoader(SUBMISSION_MODULE, here)
        spec = importlib.util.spec_from_loader(SUBMISSION_MODULE, loader, origin=here)
        assert spec is not None  # spec_from_loader makes one whenever it is given a loader
        spec.has_location = True  # __file__ is set, as for any file imported
        module = importlib.util.module_from_spec(spec)
        sys.modules[SUBMISSION_MODULE] = module
        try:
            loader.exec_module(module)  # spec.loader
        except SystemExit as err:
            return {"ok": False, "reason": "exit_at_import", "error": describe_exception(err, self.path)}
        except BaseException as err:
            return {"ok": False, "reason": "import_failed", "error": describe_exception(err, self.path)}
        found = getattr(module, self.spec.name, None)
        problem = self._entry_problem(module, found)
        if problem:
            return {"ok": False, **problem}
        self.entry = found
        if self.spec.kind != CLASS:
            self.modules[0] = found  # a function entry is handle 0: there is nothing to build
        return {"ok": True}

    def _entry_problem(self, module, found) -> dict | None:
        """Why `found` (the module's attribute named as the entry) is not the entry the exercise
        asks for, as a rejection's reason and facts; None when it is."""
        is_class = self.spec.kind == CLASS
        if found is None:
            kind = inspect.isclass if is_class else inspect.isfunction
            names = sorted(k for k, v in vars(module).items() if kind(v)
                           and getattr(v, "__module__", None) == SUBMISSION_MODULE)
            return {"reason": "no_class" if is_class else "no_function", "found": names}
        if is_class and not inspect.isclass(found):
            return {"reason": "not_a_class", "found": type(found).__name__}
        if not is_class and (inspect.isclass(found) or not callable(found)):
            return {"reason": "not_a_function", "found": type(found).__name__}
        if is_class:
            if not _binds(found, len(self.spec.args), len(self.spec.args)):
                return {"reason": "bad_init_signature", "signature": _sig_text(found, "__init__"),
                        "line": _definition_line(found, "__init__")}
            for method in self.spec.methods:
                bound = getattr(found, method.name, None)
                if bound is None:
                    return {"reason": "bad_method_signature", "method": method.name,
                            "signature": f"no {method.name} method", "line": _definition_line(found, None)}
                if not _binds(bound, method.needed, len(method.args), self_arg=True):
                    return {"reason": "bad_method_signature", "method": method.name,
                            "signature": _sig_text(found, method.name), "line": _definition_line(found, method.name)}
        elif not _binds(found, self.spec.needed, len(self.spec.args)):
            return {"reason": "bad_function_signature", "signature": _sig_text(found, None),
                    "line": _definition_line(found, None)}
        return None

    # -- requests ----------------------------------------------------------------------------
    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = self.ops.get(op) if isinstance(op, str) else None
        if method is None:
            return {"ok": False, "error": {"type": "UnknownOp", "message": str(op), "line": None}}
        try:
            return {"ok": True, **method(request)}
        except BaseException as err:  # the student's code may raise anything, SystemExit included
            return {"ok": False, "error": describe_exception(err, self.path)}

    def _module(self, request: dict):
        return self.modules[int(request["handle"])]

    def op_new(self, request: dict) -> dict:
        """Build an instance of the entry class (a function entry has nothing to build: handle 0)."""
        import torch
        if self.spec.kind != CLASS:
            return {"handle": 0, "children": {}, "params": {}, "n_params": 0}
        # The CPU's generator alone, as torch.manual_seed seeds it: that also queues a seeding of
        # every accelerator torch knows (CUDA, XPU) with a formatted stack each time, for devices
        # a worker never uses (about 3% of a warm batch's CPU).
        torch.random.default_generator.manual_seed(int(request.get("seed", 0)))
        module = self.entry(*request["args"])
        base = _resolve(self.spec.base) if self.spec.base else None
        if base is not None and not isinstance(module, base):
            raise TypeError(f"{self.spec.name}(...) built a {type(module).__name__}, not a {self.spec.base}")
        if isinstance(module, torch.nn.Module):
            module = module.to(getattr(torch, request["dtype"]))
            module.train(bool(request.get("train", False)))
        handle = len(self.modules) + 1
        self.modules[handle] = module
        if not isinstance(module, torch.nn.Module):
            return {"handle": handle, "children": {}, "params": {}, "n_params": 0}
        children = {name: [c.__module__ + "." + c.__qualname__ for c in type(child).__mro__]
                    for name, child in module.named_children()}
        measured = self.parameters(module)
        if "params" in request:
            self.op_set_params({**request, "handle": handle})
        return {"handle": handle, "children": children, "params": {name: shape for name, shape, _ in measured},
                "n_params": sum(n for _, _, n in measured)}

    def op_set_params(self, request: dict) -> dict:
        import torch
        module = self._module(request)
        with torch.no_grad():
            for name, value in request["params"].items():
                target = module.get_parameter(name)
                target.copy_(value.to(target.dtype))
        return {}

    def op_call(self, request: dict) -> dict:
        import torch
        target = self._module(request)
        if "params" in request:
            self.op_set_params(request)
        with torch.enable_grad(), self._context(request):
            out = target(*request["args"])
        return {"out": self._output(out)}

    def op_call_many(self, request: dict) -> dict:
        """Several calls in one round trip; the first exception ends them all. `context` names
        one of the entry's contexts to run them in (Entry.contexts)."""
        import torch
        target = self._module(request)
        with torch.enable_grad(), self._context(request):
            return {"outs": [self._output(target(*args)) for args in request["calls"]]}

    def op_shape_on(self, request: dict) -> dict:
        """Move the instance and the arguments to a device (e.g. 'meta') and call it there; with
        `one_device`, every torch operation the call makes checks that its tensors share one device,
        as a GPU's kernels do (the meta device's own kernels do not all check it)."""
        target = self._module(request)
        with dynamo_stand_in():
            if hasattr(target, "to") and self.spec.kind == CLASS:
                target = target.to(request["device"])
            args = [a.to(request["device"]) if hasattr(a, "to") else a for a in request["args"]]
            with _one_device() if request.get("one_device") else contextlib.nullcontext():
                out = target(*args)
        out = self._output(out)
        return {"shape": list((out[0] if isinstance(out, list) else out).shape)}

    def op_changed_inputs(self, request: dict) -> dict:
        """Which arguments one call changes in place (each tensor compared with its copy from before
        the call), as the caller's tensors would be changed."""
        import torch
        target = self._module(request)
        args = list(request["args"])
        before = [a.clone() if isinstance(a, torch.Tensor) else None for a in args]
        with torch.enable_grad(), self._context(request):
            target(*args)
        return {"changed": [i for i, (a, b) in enumerate(zip(args, before)) if b is not None and not (
            a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))]}

    def op_vjp(self, request: dict) -> dict:
        """Vector-Jacobian products of output `output` (of a call that returns several) with
        respect to argument `wrt`."""
        import torch
        target = self._module(request)
        args = list(request["args"])
        wrt, which = int(request.get("wrt", 0)), int(request.get("output", 0))
        args[wrt] = args[wrt].clone().requires_grad_(True)
        with torch.enable_grad():
            out = self._output(target(*args))
            out = out[which] if isinstance(out, list) else out
            grads = [torch.autograd.grad(out, args[wrt], grad_outputs=c.to(out.dtype), retain_graph=True)[0]
                     for c in request["cotangents"]]
        return {"grads": torch.stack(grads)}

    def _context(self, request: dict):
        """The context a call runs in: one the entry declares by name, else none."""
        import contextlib
        expression = self.contexts.get(str(request.get("context") or ""))
        if expression is None:
            return contextlib.nullcontext()
        import torch
        return eval(expression, {"torch": torch})  # the exercise's own expression, in the student's process

    def _output(self, out):
        """What a call returned, checked against the entry: one tensor, or `returns` of them."""
        import torch
        what = "forward" if self.spec.kind == CLASS else self.spec.name
        if self.spec.returns == 1:
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"{what} returned a {type(out).__name__}, not a tensor")
            return out
        if not isinstance(out, (tuple, list)) or len(out) != self.spec.returns:
            got = f"{len(out)} values" if isinstance(out, (tuple, list)) else f"a {type(out).__name__}"
            raise TypeError(f"{what} returned {got}; {self.spec.returns} tensors are expected")
        for i, item in enumerate(out):
            if not isinstance(item, torch.Tensor):
                raise TypeError(f"{what} returned a {type(item).__name__} as value {i + 1}, not a tensor")
        return list(out)


# What a GPU does with tensors of two devices without complaint: move or convert one to the other's
# device (Tensor.to(other), type_as, copy_), take the other's shape (view_as, reshape_as, expand_as),
# index with indices on the CPU. fairseq moves a cached mask with .to(tensor), the Annotated
# Transformer with type_as: device-safe code that the advice must not name.
_ACROSS_DEVICES = frozenset({"to", "type_as", "copy_", "view_as", "reshape_as", "expand_as", "__getitem__"})


@contextlib.contextmanager
def dynamo_stand_in():
    """A context in which torch._dynamo is a stand-in that leaves a function as it is: the Python
    kernels of the meta device (and others of torch's own) ask torch._dynamo, on their first call,
    to keep its compiler off them, and that import alone is half a second of CPU, a fifth of a
    cold grade's, for a compiler no grade runs. Anything else asked of the stand-in gets the real
    module, imported then; torch._dynamo imported before is used as it is. After the context, the
    functions that asked keep their answer (themselves) and torch._dynamo is imported as usual."""
    import torch
    if "torch._dynamo" in sys.modules:
        yield
        return
    stand_in = types.ModuleType("torch._dynamo", "stand-in for the device probe (sandbox.worker.dynamo_stand_in)")

    def disable(fn=None, recursive=True, **_):
        return fn if fn is not None else (lambda f: f)

    def leave():
        if sys.modules.get("torch._dynamo") is stand_in:
            del sys.modules["torch._dynamo"]
        if torch.__dict__.get("_dynamo") is stand_in:
            del torch._dynamo

    def real(name: str):
        leave()
        return getattr(importlib.import_module("torch._dynamo"), name)

    stand_in.disable = disable
    stand_in.__getattr__ = real
    sys.modules["torch._dynamo"] = stand_in
    torch._dynamo = stand_in
    try:
        yield
    finally:
        leave()


def _one_device():
    """A torch function mode in which an operation whose tensors live on two devices raises what
    CUDA raises. A 0-dim CPU tensor goes with any device, as a Python number does on a GPU; the
    operations of _ACROSS_DEVICES take tensors of two devices, as they do on a GPU."""
    import torch
    from torch.overrides import TorchFunctionMode

    def tensors(value):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from tensors(item)
        elif isinstance(value, dict):
            for item in value.values():
                yield from tensors(item)

    class OneDevice(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__name__", None) in _ACROSS_DEVICES:
                return func(*args, **kwargs)
            devices = {str(t.device) for t in tensors((args, kwargs)) if not (t.dim() == 0 and t.device.type == "cpu")}
            if len(devices) > 1:
                first, second = sorted(devices)
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                   f"devices, {first} and {second}! (in {getattr(func, '__name__', func)})")
            return func(*args, **kwargs)

    return OneDevice()


def _resolve(dotted: str):
    """The object a dotted name names ("torch.nn.Module")."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _binds(fn, needed: int, most: int, *, self_arg: bool = False) -> bool:
    """Whether `fn` accepts every count of positional arguments from `needed` to `most`."""
    try:
        sig = inspect.signature(fn)
        for n in range(needed, most + 1):
            sig.bind(*[object()] * (n + self_arg))
    except (TypeError, ValueError):
        return False
    return True


def _sig_text(obj, method: str | None) -> str:
    """`forward(self, x)`: the signature of `obj`'s method, or of `obj` itself with its name."""
    try:
        target = getattr(obj, method) if method else obj
        return f"{method or getattr(obj, '__name__', '')}{inspect.signature(target)}"
    except (TypeError, ValueError, AttributeError):
        return method or "?"


def _definition_line(obj, method: str | None) -> int | None:
    try:
        return inspect.getsourcelines(getattr(obj, method) if method else obj)[1]
    except (TypeError, OSError, AttributeError):
        return None


def serve(req_fd: int, resp_fd: int, path: str, spec: Entry, *, tally_fd: int | None = None,
          audit: bool = True) -> None:
    """Import the submission, say whether it is usable, then answer requests until EOF."""
    worker = Worker(path, spec, tally_fd, audit)
    handle, send, recv = worker.handle, protocol.send, protocol.recv  # before the student's code runs
    _compile_as_written()
    worker.prepare()
    send(resp_fd, {"event": "importing"})  # set-up done: from here on, the student's code runs
    ready = worker.load()
    send(resp_fd, {"event": "ready", **ready})  # the notes went out before the import (zygote)
    if not ready["ok"]:
        return
    while True:
        try:
            request = recv(req_fd)
        except protocol.PeerClosed:
            return
        answer = handle(request)
        try:
            send(resp_fd, answer)
        except (protocol.ProtocolError, TypeError, ValueError) as err:  # e.g. a complex tensor
            send(resp_fd, {"ok": False, "error": {"type": "BadAnswer", "line": None, "message":
                                    f"your code's answer cannot be read by the grader: {_text(err)}"}})


def _compile_as_written() -> None:
    """torch.compile runs the code as written, uncompiled. By its own contract it computes the same
    thing, and compiling here would cost a correct solution seconds to minutes for every shape the
    tests use (measured on this project's 2-core machine), which the time limits were never meant to
    pay; the image has no C++ compiler at all, and a warm sandbox's worker may not write inductor's
    caches. Both forms work: torch.compile(f) and @torch.compile(mode=...)."""
    import functools

    import torch
    original = torch.compile

    @functools.wraps(original)
    def uncompiled(model=None, *args, **kwargs):
        return model if model is not None else (lambda fn: fn)
    torch.compile = uncompiled
