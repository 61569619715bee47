"""The contract between the host, the harness and the student worker: plain, frozen records that
every side may read, and nothing else; they cross pipes and files as JSON through sandbox.codec.
An exercise declares its `Entry` (what the student submits); the host builds a `HarnessJob` from
the exercise; the harness reads the job; the worker reads the entry. Nothing here names an
exercise, and nothing here runs the student's code.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sandbox.codec import Record
from sandbox.limits import Limits

CLASS, FUNCTION = "class", "function"


@dataclass(frozen=True)
class Method(Record):
    """A method the tests call on an instance: its arguments after self, the first `required` of
    them required (the rest default to None)."""
    name: str
    args: tuple[str, ...]
    required: int | None = None

    @property
    def needed(self) -> int:
        return len(self.args) if self.required is None else self.required


@dataclass(frozen=True)
class Entry(Record):
    """What the student submits, as the exercise declares it: a class (built with `args`, whose
    instances are `base` and answer `methods`, the first of which is what a call runs) or a
    function (called with `args`). A call returns `returns` tensors: one tensor, or a tuple of
    them. The rest is for the sandbox: what of the installed libraries does the exercise for the
    student and is refused in the worker (`refuse`: dotted paths of functions, classes, modules or
    native operators; sandbox.audit, which also refuses what no honest solution needs), Python
    source that a warm sandbox runs once on one thread so that every process forked from it finds
    torch's lazy set-up done for the exercise's kind of op (`warmup`), and named contexts a call
    may ask to run inside (`contexts`: name -> an expression evaluated in the worker)."""
    kind: str
    name: str
    args: tuple[str, ...] = ()
    required: int | None = None
    methods: tuple[Method, ...] = ()
    base: str = ""
    returns: int = 1
    refuse: tuple[str, ...] = ()
    warmup: str = ""
    contexts: tuple[tuple[str, str], ...] = ()

    @classmethod
    def a_class(cls, name: str, args: tuple[str, ...], *methods: Method, base: str = "torch.nn.Module",
                **more: Any) -> Entry:
        return cls(CLASS, name, tuple(args), None, tuple(methods), base, **more)

    @classmethod
    def a_function(cls, name: str, args: tuple[str, ...], required: int | None = None, **more: Any) -> Entry:
        return cls(FUNCTION, name, tuple(args), required, **more)

    def __post_init__(self) -> None:
        if self.kind not in (CLASS, FUNCTION):
            raise ValueError(f"an entry is a {CLASS} or a {FUNCTION}, not {self.kind!r}")
        if not self.name.isidentifier():
            raise ValueError(f"{self.name!r} is not a Python name")

    @property
    def needed(self) -> int:
        return len(self.args) if self.required is None else self.required

    def context(self, name: str) -> str | None:
        return dict(self.contexts).get(name)

    # --- what the student reads ---------------------------------------------------------------

    def call_text(self, args: tuple[str, ...] | None = None, required: int | None = None) -> str:
        """How the entry is called: `name(a, b, c=None)`."""
        args = self.args if args is None else args
        needed = len(args) if required is None else required
        return f"{self.name}({', '.join([*args[:needed], *(f'{a}=None' for a in args[needed:])])})"

    def describe(self) -> str:
        """The entry in one phrase, for messages: "class Model(dim, depth)", "function f(x)"."""
        return f"{self.kind} {self.call_text()}"

    def defined_in(self, source: bytes) -> bool:
        """Whether a file's bytes define the entry (a `class NAME` or `def NAME`): how one file is
        chosen among several in an upload. Reading, not running: a guess that the grade confirms."""
        keyword = b"class" if self.kind == CLASS else b"def"
        return re.search(rb"\b" + keyword + rb"\s+" + re.escape(self.name.encode()) + rb"\b", source) is not None


# How each way a submission can fail to load reads to the student. {entry} is Entry.describe();
# the rest are the facts the worker reported. An exercise may word any of them its own way.
REJECTIONS = {
    "import_failed": "importing your file raised {type}: {message}{at}",
    "exit_at_import": "your file ends the program while it is imported (SystemExit{at}); remove the "
                      "sys.exit()/exit() call or put it under if __name__ == \"__main__\":",
    "no_class": "your file defines no class {name}{found_list}; the class must be named exactly {name}",
    "not_a_class": "{name} in your file is not a class (it is a value of type {found})",
    "bad_init_signature": "{name} must be created as {call}; yours has {signature}{at}",
    "bad_method_signature": "{method} must accept ({method_needed}) and ({method_full}); yours is {signature}{at}",
    "no_function": "your file defines no function {name}{found_list}; the function must be named exactly {name}",
    "not_a_function": "{name} in your file is not a function (it is a value of type {found})",
    "bad_function_signature": "{name} must be callable as {call}; yours is {signature}{at}",
}


def rejection_text(entry: Entry, rejection: dict[str, Any], at: str, texts: dict[str, str] | None = None) -> str:
    """The sentence for a rejection the worker reported (`rejection`: its reason and facts);
    `at`: where in the student's file (" at line 3" or ""); `texts`: the exercise's own wordings."""
    reason = str(rejection.get("reason"))
    raw_error = rejection.get("error")
    error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
    found = rejection.get("found")
    method = next((m for m in entry.methods if m.name == rejection.get("method")),
                  entry.methods[0] if entry.methods else Method("", ()))
    facts = {
        "entry": entry.describe(), "name": entry.name, "call": entry.call_text(),
        "type": error.get("type"), "message": error.get("message"), "at": at, "found": found,
        "signature": rejection.get("signature"),
        "found_list": (f" ({'classes' if entry.kind == CLASS else 'functions'} found: {', '.join(map(str, found))})"
                       if isinstance(found, list) and found else ""),
        "method": method.name,
        "method_needed": ", ".join(method.args[:method.needed]),
        "method_full": ", ".join([*method.args[:method.needed], *(f"{a}=None" for a in method.args[method.needed:])]),
    }
    wording = {**REJECTIONS, **(texts or {})}
    if reason in wording:
        return wording[reason].format(**facts)
    if reason.startswith("import_"):  # the worker timed out, exited or flooded while importing
        return f"your file could not be imported: {rejection.get('message')}"
    return f"your file could not be loaded ({reason})"


# The warm server's timeouts, which its host side waits by too (sandbox.warm_server, sandbox.warm).
WARM_READY_TIMEOUT_S = 180.0  # a server's start: the torch, pytest and exercise imports, on a loaded machine
WARM_RESET_TIMEOUT_S = 30.0   # the clean-up after a submission; longer, and the server is replaced


@dataclass(frozen=True)
class Group:
    """One test group of an exercise, as its `groups.py` declares it: the test function's name, the
    title a student reads, the points its cases share, and who sees it (visible, hidden,
    after_due_date). What a course file may override; what `grade exercises --groups` lists."""
    name: str
    title: str
    points: float
    visibility: str = "visible"


def graded_by(groups: tuple[Group, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator an exercise's tests are marked with: `@graded` on `test_x` gives it the title,
    points and visibility that `groups` declares under its name (as the markers the harness's
    pytest plugin reads); a test missing from `groups` is an error at import, not 0 points."""
    by_name = {g.name: g for g in groups}

    def graded(test: Callable[..., Any]) -> Callable[..., Any]:
        import pytest  # only the harness marks tests; the host reads the groups alone
        group = by_name.get(test.__name__)
        if group is None:
            raise LookupError(f"{test.__name__} is not declared in the exercise's groups "
                              f"({', '.join(by_name)})")
        test.__doc__ = group.title
        marked: Callable[..., Any] = pytest.mark.visibility(group.visibility)(pytest.mark.points(group.points)(test))
        return marked
    return graded


@dataclass(frozen=True)
class BugInfo:
    """One mistake of an exercise's bug catalog, in words a student understands: `affects` names the
    test groups (test function names) whose points it costs; an `advice` entry costs no points
    unless an instructor gives it a weight."""
    title: str
    explanation: str
    fix: str
    affects: tuple[str, ...]
    advice: bool = False

    def finding(self, bug_id: str, variant: str | None, evidence: str) -> dict[str, Any]:
        """The report's entry for this mistake, found in one submission with this evidence."""
        return {"id": bug_id, "variant": variant, "title": self.title, "explanation": self.explanation,
                "fix": self.fix, "evidence": evidence, "affects": list(self.affects), "advice": self.advice}


@dataclass(frozen=True)
class ZygoteHandoff(Record):
    """A zygote someone else started and hands to the harness: its control socket's descriptor,
    whether its ready message was taken, its notes, and whether a pids cgroup caps it."""
    fd: int
    ready: bool = False
    notes: tuple[str, ...] = ()
    capped: bool = False


@dataclass(frozen=True)
class HarnessJob(Record):
    """Everything the harness needs to grade one submission, built on the host from the exercise:
    the exercise's name and version, its test package (a dotted module name, found wherever the
    exercise is installed), the entry contract, the limits, the notebook line map, places the
    student's code may not read, and the seed every input, shape order and weight of the grade is
    drawn from (grader.keys.grade_seed: held by the host, the same for the same bytes; it reaches
    the trusted harness, never the student's worker). The launcher fills in where the submission lies, the scratch
    folder and (warm and image sandboxes) the zygote it started."""
    exercise: str
    version: str
    tests: str
    entry: Entry
    limits: Limits = field(default_factory=Limits)
    line_map: tuple[Sequence[int], ...] = ()   # rows (first, count, cell): sandbox.source.LineMap
    hidden: tuple[str, ...] = ()
    submission: str = ""
    scratch: str = ""
    zygote: ZygoteHandoff | None = None
    seed: str = ""   # the host's seed for this grade's draws (sandbox.kit.Draws); never sent to a worker

    def at(self, submission: str, *, scratch: str = "", zygote: ZygoteHandoff | None = None,
           hidden: tuple[str, ...] = ()) -> HarnessJob:
        """This job for a submission at `submission` (as the launcher placed it)."""
        return replace(self, submission=submission, scratch=scratch, zygote=zygote,
                       hidden=(*self.hidden, *hidden))
