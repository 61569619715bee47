"""What honest code may do in the student's process, enforced where that process cannot undo it.

Installed by the worker before the submission is imported, in two parts:

- An audit hook (sys.addaudithook; Python offers no way to remove one) refuses, with a message
  that names what was used and why, what no honest solution needs:
  * loading code at run time: marshal (but for the import system reading a library's own .pyc),
    pickle's globals, code objects built or replaced (code.replace), and compile/exec/eval of text
    that is not the submission's own (every line of it a piece of the submission), unless library
    code generates it (dataclasses, namedtuple, TorchScript's parser); a library function that
    compiles what it is handed (importlib's loaders, runpy, timeit, code, torch.fx) may compile only
    the submission's text or a library file exactly as it lies on disk;
  * foreign code: every ctypes event (loading a shared object, a foreign call, memory as objects),
    and extension modules from outside the installed libraries;
  * starting programs (exec, spawn, subprocess): a new interpreter would not have this hook;
  * introspection: frames (sys._getframe from the student's code, a traceback's or generator's
    frame, every thread's frames), the garbage collector's object lists, tracing and profiling;
  * the process's own descriptors and memory (/proc/self/fd/N reopens the grader's pipes, /proc/
    self/mem is the process), and the files that hold the refused implementations' source or
    bytecode;
  * changing a refused implementation (its code, defaults, attributes).
- The exercise's refused implementations (Entry.refuse: the parts of a library that do the
  exercise for the student) are made to refuse in place: a Python function gets refusing code
  (every alias, import route and reference holds the refusing one, and no copy of the original
  code is kept), a class gets refusing code in every method, a native operator gets a refusing
  kernel in PyTorch's dispatcher, a module not yet imported cannot be (its file cannot be read).
  Their source cannot be read either: the files are refused, and linecache (which TorchScript and
  tracebacks read) holds those files with the refused parts blanked, so that what they also hold
  (F.softmax, nn.Softmax) can still be scripted.

Each refusal writes one byte into the tally pipe, whose other end the harness holds (a byte once
written cannot be taken back): 1 + the index of a refused implementation, or KIT_BASE + the index
of a rule of KIT_RULES. The student's code can catch the exception; it cannot unsay the byte.

What stays open, said plainly: library source copied into the submission (the similarity finder's
job, not this one's); code that a library generator is tricked into compiling (a dataclass field
named with code) is allowed when it is not a refused implementation's source, which cannot be read;
and whatever the process could do before this runs (nothing of the student's).
"""
from __future__ import annotations

import os
import sys
from typing import Any

from sandbox.errors import GraderError

KIT_BASE = 0x80
# (name, why): the byte of a rule is KIT_BASE + its index
KIT_RULES = (
    ("loading code at run time", "the grader grades the code in your file, so code may not be loaded, "
                                 "decoded or compiled from anything else while it runs"),
    ("foreign code", "ctypes and shared objects run code the grader cannot see and can rewrite the "
                     "process's memory"),
    ("starting a program", "a new program runs outside the grader's rules"),
    ("introspection of frames and objects", "reading other code's frames or the garbage collector's "
                                            "objects reaches the grader's own state"),
    ("the process's own descriptors and memory", "they are the grader's channels, not your code's"),
    ("a refused implementation", "it is what the exercise asks you to write yourself"),
)
LOAD, FOREIGN, PROGRAM, INTROSPECTION, PROCESS, IMPLEMENTATION = range(len(KIT_RULES))

INTROSPECTION_EVENTS = frozenset({"sys._current_frames", "sys._current_exceptions", "sys.settrace",
                                  "sys.setprofile"})
GC_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
PROGRAM_EVENTS = frozenset({"os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen",
                            "os.startfile", "os.fork", "os.forkpty"})
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
CHANGE_EVENTS = frozenset({"object.__setattr__", "object.__delattr__"})
# stdlib modules that hand a frame to their caller: whoever called them asked for the frame
FRAME_HANDERS = ("inspect.py", "traceback.py")
# library functions that compile the text they are handed (importlib's loaders are frozen modules)
COMPILERS = ("<frozen importlib._bootstrap_external>", "<frozen importlib._bootstrap>", "runpy.py", "timeit.py",
             "code.py", "codeop.py", "doctest.py", "pdb.py", "/torch/fx/graph_module.py", "/torch/package/")
PASS_THROUGH = ("ast.py",)  # ast.parse compiles for its caller
# library code that compiles text it generates itself (measured on every correct file of both
# corpora, TorchScript included, and on importing torch._dynamo): (file, function); a dataclass's
# methods only when dataclasses itself asked for them
GENERATORS = frozenset({("/dataclasses.py", "_create_fn"), ("/collections/__init__.py", "namedtuple"),
                        ("/typing.py", "__init__"), ("/typing.py", "_evaluate"), ("/torch/_sources.py", "parse_def"),
                        ("/torch/jit/_check.py", "check"), ("/torch/jit/annotations.py", "get_signature"),
                        ("/torch/_jit_internal.py", "get_type_hint_captures")})
# library code that runs whatever callable it is handed: its own frame proves nothing
TRAMPOLINES = ("/threading.py", "/concurrent/futures/thread.py", "/concurrent/futures/_base.py", "/contextlib.py",
               "/functools.py", "<frozen importlib._bootstrap>")
# TorchScript's own entry points that read code from an archive, IR text or TorchScript source
# without Python's compile: refused like the archives they load.
TORCHSCRIPT_LOADERS = (
    "torch.jit.load", "torch.jit._serialization.load", "torch._C.import_ir_module",
    "torch._C.import_ir_module_from_buffer", "torch._C._import_ir_module_from_package",
    "torch._C._load_for_lite_interpreter", "torch._C._load_for_lite_interpreter_from_buffer",
    "torch._C._load_jit_module_from_bytes", "torch._C._load_jit_module_from_file",
    "torch._C._load_mobile_module_from_bytes", "torch._C._load_mobile_module_from_file",
    "torch._C.parse_ir", "torch._C._create_function_from_graph",
)
# TorchScript's entry points that compile TorchScript source text (code, not the submission's Python,
# compiled without Python's compile): (owner, method, the thin library wrappers that pass the text
# on). Refused when the text comes from the student's code; torch's own generated text (a
# ModuleList's __len__) passes.
TORCHSCRIPT_TEXT = (("torch._C.CompilationUnit", "__init__", ()), ("torch._C.CompilationUnit", "define", ()),
                    ("torch._C.ScriptModule", "_define", ("/torch/jit/_script.py",)),
                    ("torch._C", "_parse_source_def", ("/torch/jit/_script.py",)))
# builtin modules whose entry points are replaced below; importing them afresh would restore them
REPLACED_BUILTINS = ("_posixsubprocess", "torch._C")


class Refused(GraderError, PermissionError):
    """What the student's code tried is outside what honest solutions use; it did not run."""


def rule_text(rule: int) -> str:
    return KIT_RULES[rule][0]


def describe_refusals(counts: dict[str, int]) -> str | None:
    """The evidence for a finding, from StudentModule.calls_to_watched(): what was refused and
    how often, or None when nothing was."""
    said = [f"{name.rsplit('.', 1)[-1] if '.' in name else name} {n} time{'s' if n > 1 else ''}"
            for name, n in counts.items() if n]
    return "during the grade, the grader refused " + "; ".join(said) if said else None


def install(refuse: tuple[str, ...], tally_fd: int | None, submission: str, *, readable_as: str = "") -> None:
    """Make the refused implementations refuse and add the audit hook. Runs once, in the worker,
    before the submission is imported; `submission` is the path of the file to be imported,
    `readable_as` the name it is opened by (the worker's, relative to the working folder)."""
    import importlib.util
    path = os.path.abspath(submission)
    with open(readable_as or path, "rb") as f:
        data = f.read()
    try:
        text = importlib.util.decode_source(data)  # as Python reads it: its coding cookie, else UTF-8
    except (UnicodeDecodeError, SyntaxError, LookupError):
        # Python imports a file whose comments hold bytes that are not UTF-8 (it does not decode
        # them): the text is only compared with what the file compiles later, line by line
        text = data.decode("utf-8", "replace")
    tally = _tally_writer(tally_fd)
    guarded: set[object] = set()
    files: set[str] = set()
    for index, dotted in enumerate(refuse):
        guarded |= _refuse_in_place(dotted, tally, bytes([index + 1]), files)
    for dotted in TORCHSCRIPT_LOADERS:
        _replace_attribute(dotted, _refuser(tally, bytes([KIT_BASE + LOAD]), f"{dotted} (a TorchScript archive, graph "
                           f"or source)", LOAD), guarded)
    sealed = _guard_torchscript_text(tally, guarded)
    import _posixsubprocess
    _posixsubprocess.fork_exec = _refuser(tally, bytes([KIT_BASE + PROGRAM]), "_posixsubprocess.fork_exec", PROGRAM)
    _blank_in_linecache(files)
    sys.addaudithook(_hook(tally, frozenset(id(g) for g in guarded), _roots(), path, text,
                           frozenset(files | {_cached(f) for f in files}), sealed))


# -- the tally -------------------------------------------------------------------------------

def _tally_writer(fd: int | None):
    """One byte into the pipe, if it is still the pipe it was (a closed or replaced descriptor
    makes the write a no-op: the refusal itself still stands). Its references live in keyword
    defaults, which the hook lets nobody change."""
    identity = None
    if fd is not None:
        os.set_blocking(fd, False)  # a pipe the student filled must not hang a refusal
        stat = os.fstat(fd)
        identity = (stat.st_dev, stat.st_ino)

    def tally(mark: bytes, *, _fd=fd, _identity=identity, _fstat=os.fstat, _write=os.write) -> None:
        if _fd is None:
            return
        try:
            now = _fstat(_fd)
            if (now.st_dev, now.st_ino) == _identity:
                _write(_fd, mark)
        except OSError:
            pass
    return tally


def _message(what: str, rule: int) -> str:
    name, why = KIT_RULES[rule]
    return f"{what}: refused by the grader ({name}; {why})"


def _refuser(tally, mark: bytes, what: str, rule: int):
    """A callable that counts and refuses, whatever it is called with."""
    def refused(*args, _tally=tally, _mark=mark, _text=_message(what, rule), _error=Refused, **kwargs):
        _tally(_mark)
        raise _error(_text)
    refused.__name__ = what.rsplit(".", 1)[-1]
    return refused


# -- refused implementations -----------------------------------------------------------------

def _resolve(dotted: str):
    """The object a dotted path names, or None when its module is not imported (nor to be)."""
    import importlib
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if name in sys.modules or cut == 1:
            target: Any = sys.modules.get(name) or importlib.import_module(name)
            for attr in parts[cut:]:
                target = getattr(target, attr, None)
                if target is None:
                    return None
            return target
    return None


def _refuse_in_place(dotted: str, tally, mark: bytes, files: set) -> set:
    """Make what `dotted` names refuse; add the files that hold its source to `files`. Returns the
    objects whose attributes nobody may change afterwards."""
    import importlib.util
    import types
    what = dotted.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn.")
    target = _resolve(dotted)
    if target is None:  # a module not imported yet: its file cannot be read, so it cannot be
        spec = importlib.util.find_spec(dotted) if "." not in dotted or dotted.rsplit(".", 1)[0] in sys.modules \
            else None
        if spec is not None and spec.origin:
            files.add(os.path.realpath(spec.origin))
        return set()
    if isinstance(target, types.ModuleType):
        if target.__file__:  # a module with no file (a namespace package) has no source to refuse
            files.add(os.path.realpath(target.__file__))
        guarded = {target}
        for value in list(vars(target).values()):
            if getattr(value, "__module__", None) == target.__name__ and isinstance(value, (type, types.FunctionType)):
                guarded |= _refuse_object(value, tally, mark, what, files)
        return guarded
    if isinstance(target, (type, types.FunctionType)):
        return _refuse_object(target, tally, mark, what, files)
    _refuse_operator(dotted.rsplit(".", 1)[1], tally, mark, what)
    return set()


def _refuse_object(target, tally, mark: bytes, what: str, files: set) -> set:
    import types
    functions = [target] if isinstance(target, types.FunctionType) else []
    if isinstance(target, type):
        for value in vars(target).values():
            value = getattr(value, "__func__", value)   # staticmethod, classmethod
            value = getattr(value, "fget", value)       # property
            if isinstance(value, types.FunctionType):
                functions.append(value)
    for function in functions:
        files.add(os.path.realpath(function.__code__.co_filename))
        _RANGES.setdefault(os.path.realpath(function.__code__.co_filename), []).append(_lines_of(function))
        function.__code__ = _refusing_code(function, tally, mark, what)
    return {target, *functions}  # a class's own range is not blanked: its code is all in its methods


_RANGES: dict[str, list[tuple[int, int]]] = {}  # file -> line ranges of refused source (1-based)


def _lines_of(function) -> tuple[int, int]:
    """The lines a function's source spans: from its first line to the last line any of its code
    (nested code included) was compiled from. Read off the code, not by tokenizing the file."""
    import types
    last, stack = function.__code__.co_firstlineno, [function.__code__]
    while stack:
        code = stack.pop()
        last = max([last, *(line for _, _, line in code.co_lines() if line is not None)])
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return (function.__code__.co_firstlineno, last)


PLACEHOLDER = "\0sandbox.audit:refuse"


def _refusing_code(function, tally, mark: bytes, what: str):
    """Code for `function` that counts and refuses, with the same free variables (the closure
    must still fit) and name."""
    import warnings
    free = function.__code__.co_freevars
    name = function.__code__.co_name if function.__code__.co_name.isidentifier() else "refused"
    source = ("def outer():\n" + "".join(f"    {n} = None\n" for n in free)
              + f"    def {name}(*args, **kwargs):\n"
              + (f"        ({', '.join(free)},)\n" if free else "")
              + f"        {PLACEHOLDER!r}()\n    return {name}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": the constant is replaced below
        module = compile(source, function.__code__.co_filename, "exec")
    outer = next(c for c in module.co_consts if getattr(c, "co_name", None) == "outer")
    code = next(c for c in outer.co_consts if getattr(c, "co_name", None) == name)
    refuse = _refuser(tally, mark, what, IMPLEMENTATION)
    return code.replace(co_consts=tuple(refuse if c == PLACEHOLDER else c for c in code.co_consts),
                        co_firstlineno=function.__code__.co_firstlineno)


def _refuse_operator(name: str, tally, mark: bytes, what: str) -> None:
    """A CPU kernel for aten operator `name` that counts the call and refuses to run it, on a raw
    dispatcher library (torch.library.Library's finalizer could be found and called to lift it)
    kept alive only by the kernel's own keyword defaults."""
    import warnings

    import torch
    handle = torch._C._dispatch_library("IMPL", "aten", "", __file__, 0)
    refuse = _refuser(tally, mark, what, IMPLEMENTATION)

    def kernel(*args, _refuse=refuse, _handle=handle, **kwargs):
        _refuse()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the point
        for key in ("CPU", "NestedTensorCPU"):
            try:
                # torch's stub lacks impl's with_keyset, which torch.library itself passes
                handle.impl(name, key, kernel, False)  # type: ignore[call-arg]
            except RuntimeError:
                pass  # no such operator, or none for this key


def _guard_torchscript_text(tally, guarded: set) -> list:
    """TorchScript source text compiles only when library code hands it over (TORCHSCRIPT_TEXT).
    Returns the guards, whose attributes (the originals in their keyword defaults) the hook seals."""
    mark, guards = bytes([KIT_BASE + LOAD]), []
    here = os.path.dirname(os.path.abspath(__file__)) + "/"
    libraries = tuple(r for r in _roots() if r != here)  # where the text's caller must lie (not this package)
    for owner_path, name, wrappers in TORCHSCRIPT_TEXT:
        owner = _resolve(owner_path)
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            continue
        what = f"{owner_path}.{name} (TorchScript source text)"
        empty_constructor = name == "__init__"

        def guarded_call(*args, _original=original, _wrappers=wrappers, _what=_message(what, LOAD),
                         _empty=empty_constructor, _frame=sys._getframe, _libraries=libraries,
                         _tally=tally, _mark=mark, **kwargs):
            if not (_empty and len(args) <= 1 and not kwargs.get("lang")):  # CompilationUnit() holds no text
                frame = _frame(1)
                while frame is not None and _wrappers and frame.f_code.co_filename.endswith(_wrappers):
                    frame = frame.f_back
                caller = frame.f_code.co_filename if frame is not None else None
                if type(caller) is not str or not (caller.startswith("<frozen ") or caller.startswith(_libraries)):
                    _tally(_mark)
                    raise Refused(_what)
            return _original(*args, **kwargs)
        try:
            setattr(owner, name, guarded_call)
            guarded.add(owner)
            guards.append(guarded_call)
        except (AttributeError, TypeError):
            pass
    return guards


def _replace_attribute(dotted: str, refusal, guarded: set) -> None:
    owner_path, attr = dotted.rsplit(".", 1)
    owner = _resolve(owner_path)
    if owner is not None and hasattr(owner, attr):
        try:
            setattr(owner, attr, refusal)
            guarded.add(owner)
        except (AttributeError, TypeError):
            pass


def _blank_in_linecache(files: set) -> None:
    """linecache holds each refused file with its refused lines blank: what else the file defines
    (F.softmax for TorchScript, say) stays readable; the refused source is not."""
    import linecache
    for path in files:
        try:
            stat = os.stat(path)
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except (OSError, UnicodeDecodeError):
            continue
        for first, last in _RANGES.get(path, ()):
            for i in range(max(first, 1) - 1, min(last, len(lines))):
                lines[i] = "\n"
        for name in [k for k, v in linecache.cache.items() if len(v) == 4 and os.path.realpath(v[3]) == path]:
            del linecache.cache[name]
        linecache.cache[path] = (stat.st_size, stat.st_mtime, lines, path)


def _cached(path: str) -> str:
    import importlib.util
    try:
        return importlib.util.cache_from_source(path)
    except (NotImplementedError, ValueError):
        return path


def _roots() -> tuple[str, ...]:
    """Where trusted code lies: the Python installation, its site-packages, this package."""
    import sysconfig
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    roots |= {os.path.realpath(r) for r in roots}
    roots.add(os.path.dirname(os.path.abspath(__file__)))
    return tuple(sorted(r.rstrip("/") + "/" for r in roots))


# -- the hook --------------------------------------------------------------------------------

def _hook(tally, guarded: frozenset, roots: tuple, submission: str, text: str, refused_files: frozenset,
          guards=()):
    """The audit hook. Everything it uses is bound now, in keyword defaults; it never calls a
    method of an argument the student may have made (a str subclass), and a per-thread guard
    stops the events its own look at the stack raises."""
    import _thread
    import marshal
    from importlib.util import decode_source as _decode
    submission_lines = frozenset(line.strip() for line in text.splitlines())
    busy: set[int] = set()
    sealed: set[int] = {id(tally), *(id(g) for g in guards)}  # their defaults hold what they guard
    basenames = frozenset(os.path.basename(f) for f in refused_files)

    def trusted(code, *, _roots=roots, _submission=submission, _str=str, _tuple=tuple) -> bool:
        name = code.co_filename
        if type(name) is not _str or name == _submission:
            return False
        return name.startswith("<frozen ") or _str.startswith(name, _tuple(_roots))

    def caller(frame, skip=()):
        """The first frame, from `frame` outwards, not in one of the files `skip` ends with."""
        while frame is not None and skip and frame.f_code.co_filename.endswith(skip):
            frame = frame.f_back
        return frame

    def generator(frame) -> bool:
        """`frame` is library code that compiles text it made itself (GENERATORS)."""
        code = frame.f_code
        for suffix, name in GENERATORS:
            if code.co_name == name and code.co_filename.endswith(suffix):
                if name == "_create_fn":  # its text comes from its caller: dataclasses' own code only
                    outer = frame.f_back
                    return outer is not None and outer.f_code.co_filename.endswith("/dataclasses.py")
                return True
        return False

    def importing_library(frame) -> bool:
        """`frame` runs while a library module is imported, with nothing but library code between
        (mpmath builds its arithmetic from text at import, say): text the library made itself."""
        depth = 0
        while frame is not None and depth < 64:
            code = frame.f_code
            if not trusted(code) or code.co_filename.endswith(COMPILERS):
                return False
            if code.co_name == "<module>":
                return True
            frame, depth = frame.f_back, depth + 1
        return False

    def from_submission(source) -> bool:
        """Every non-blank line of `source` is a piece of the submission's text."""
        if type(source) is bytes:
            try:
                source = _decode(source)  # as Python reads a file: its coding cookie
            except (UnicodeDecodeError, SyntaxError, LookupError):
                # bytes that are not UTF-8, as in a comment Python does not decode: read as the
                # submission's own text was (install), so its own file still compiles
                source = source.decode("utf-8", "replace")
        if type(source) is not str:
            return False
        for line in source.splitlines():
            line = line.strip()
            if line and line not in submission_lines and line not in text:
                return False
        return True

    def library_file(source, filename) -> bool:
        """`source` is exactly the content of `filename`, a library file that is not refused."""
        if type(filename) is not str or not filename.startswith(roots):
            return False
        real = os.path.realpath(filename)
        if real in refused_files or not real.startswith(roots):
            return False
        try:
            with open(real, "rb") as f:
                data = f.read()
        except OSError:
            return False
        if type(source) is str:
            source = source.encode("utf-8")
        return type(source) is bytes and source == data

    def verified_bytecode(frame, data) -> bool:
        """marshal.loads called by the import system on the bytes of a library's .pyc."""
        if frame is None or frame.f_code.co_name != "_compile_bytecode" or not trusted(frame.f_code):
            return False
        path = frame.f_locals.get("bytecode_path")
        if type(path) is not str or not path.startswith(roots) or os.path.realpath(path) in refused_files:
            return False
        try:
            with open(path, "rb") as f:
                return f.read()[16:] == bytes(data)
        except (OSError, TypeError):
            return False

    def refused_path(path):
        """The rule an open of `path` breaks, or None."""
        if type(path) is bytes:
            path = os.fsdecode(path)
        if type(path) is not str:
            return None  # a descriptor already open
        real = os.path.realpath(path)
        for name in (os.path.abspath(path), real):  # /proc/self/fd/N resolves to what it opens
            parts = name.split("/")
            if name.startswith("/dev/fd/") or name.startswith("/proc/") and len(parts) > 2 and (
                    parts[2].isdigit() or parts[2] in ("self", "thread-self")):
                return PROCESS
        if real in refused_files or (not os.path.isabs(path) and os.path.basename(path) in basenames):
            return IMPLEMENTATION
        return None

    def judge(event, args, frame):
        """None when allowed, else (what, rule)."""
        if type(event) is not str:
            return None  # sys.audit called with a made-up event: only the student's own business
        if event.startswith("ctypes."):
            return event, FOREIGN
        if event in PROGRAM_EVENTS:
            return event, PROGRAM
        if event in INTROSPECTION_EVENTS:
            return event, INTROSPECTION
        if event == "pickle.find_class":
            return f"unpickling {args[0]}.{args[1]}", LOAD
        if event in ("marshal.loads", "marshal.load"):
            return None if event == "marshal.loads" and verified_bytecode(frame, args[0]) else (event, LOAD)
        if event in CHANGE_EVENTS:
            return (f"changing {args[1]} of a refused implementation", IMPLEMENTATION) if id(args[0]) in guarded \
                else None
        if event == "open":
            rule = refused_path(args[0])
            return None if rule is None else (f"opening {args[0]}", rule)
        if event in ("os.link", "os.symlink"):
            return event, PROCESS
        if event == "import":
            return (f"importing {args[0]} again", LOAD) if args[0] in REPLACED_BUILTINS else None
        if event == "compile":
            source, filename = args[0], args[1]
            who = caller(frame, PASS_THROUGH)
            if from_submission(source) and not (type(filename) is str and filename.startswith(("<frozen", *roots))
                                                and (who is None or not trusted(who.f_code))):
                return None
            if who is None:
                return None  # the interpreter's own (a traceback's caret, say)
            if trusted(who.f_code):
                if who.f_code.co_filename.endswith(COMPILERS) and library_file(source, filename):
                    return None
                if generator(who) or importing_library(who):
                    return None
            return f"compiling text that is not your file's ({filename})", LOAD
        if event == "code.__new__":
            return "building a code object", LOAD
        if event in GC_EVENTS:
            return event, INTROSPECTION
        if event == "object.__getattr__" and id(args[0]) in sealed:
            return f"reading {args[1]} of the grader's own code", INTROSPECTION
        if event == "sys._getframe" or (event == "object.__getattr__" and args[1] in FRAME_ATTRIBUTES):
            who = caller(frame, FRAME_HANDERS)
            return None if who is None or trusted(who.f_code) and not who.f_code.co_filename.endswith(
                TRAMPOLINES) else (
                event if event == "sys._getframe" else f"reading {args[1]}", INTROSPECTION)
        return None

    def hook(event, args, *, _busy=busy, _ident=_thread.get_ident, _judge=judge, _frame=sys._getframe,
             _tally=tally, _error=Refused, _message=_message, _base=KIT_BASE, _bytes=bytes, _str=str) -> None:
        me = _ident()
        if me in _busy:
            return  # an event of the hook's own look at the stack
        _busy.add(me)
        try:
            try:
                frame = _frame(1)
            except ValueError:  # no Python frame: an event of the interpreter itself
                frame = None
            verdict = _judge(event, args, frame)
        finally:
            _busy.discard(me)
        if verdict is not None:
            what, rule = verdict
            _tally(_bytes([_base + rule]))
            raise _error(_message(_str(what)[:200], rule))
    sealed.add(id(hook))
    sealed.add(id(judge))
    del marshal
    return hook
