"""The typed result of a grade, and its native JSON form (the contract in DESIGN.md)."""
from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field

from grader.text import name, safe

SCHEMA = 1
COURSE_BUG = "course:"  # the id prefix of a mistake a course file names (a cluster of behaviour)

_CASE = re.compile(r"\s*\[[^\]]*\]\s*$")


def group_title(test_name: str) -> str:
    """A test group's readable title: the test name without its trailing ' [params]'."""
    return _CASE.sub("", test_name) or test_name


def is_course_bug(bug_id: str) -> bool:
    """A mistake a course file named ([clusters.ID]); its id is no catalog id a reader knows."""
    return bug_id.startswith(COURSE_BUG)
POINT_DIGITS = 2  # decimals of points as people read them: a third of 20 shows as 6.67


def points(value: float, digits: int = POINT_DIGITS) -> str:
    """Points as a person reads them: at most `digits` decimals, no trailing zeros (66.6667 -> '66.67',
    24.0 -> '24'). Every readable view (terminal, pages, class report, gradebook) shows them so."""
    text = f"{round(float(value), digits):.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def out_of(score: float, max_score: float) -> str:
    """'52.17 / 88'."""
    return f"{points(score)} / {points(max_score)}"


def _sanitised(obj, one_line: tuple[str, ...], names: tuple[str, ...] = ()) -> None:
    """Pass every text field of a result's part through the one sanitiser as it is made, so that no
    output (terminal, JSON, CSV, HTML, platforms) can receive what a student's run or file name
    put there raw. `one_line`: the fields shown as ids or titles; `names`: submission names."""
    for f in dataclasses.fields(obj):
        if f.metadata.get("raw"):
            continue  # kept as the harness wrote it, never shown: what a rescore reads
        value = getattr(obj, f.name)
        cleaned = name(value) if f.name in names else _clean(value, f.name in one_line)
        if cleaned is not value:
            object.__setattr__(obj, f.name, cleaned)


def _clean(value, one_line: bool):
    if isinstance(value, enum.Enum):  # statuses: str-valued, but the grader's own
        return value
    if isinstance(value, str):
        return safe(value, one_line=one_line)
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return tuple(safe(v, one_line=one_line) for v in value)
    if isinstance(value, dict):
        return {safe(k, one_line=True): _clean(v, True) for k, v in value.items()}
    return value


class Status(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str() and f-strings of a member
    GRADED = "graded"        # the suite ran; the score stands
    REJECTED = "rejected"    # the submission could not be graded at all; score 0
    ERROR = "error"          # the grader or sandbox failed; no score may be recorded


class JobState(enum.StrEnum):
    """Where a grade handed to a queue or the service's engine is (grader.queue.state, the
    service's `state`); a JSON string on the wire."""
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"            # a result with a score, or a rejection
    FAILED = "failed"        # a result of status error (the grader failed: no score), or one that did not verify


class Visibility(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str() and f-strings of a member
    """When a student may see a test's result (set by the exercise's `visibility` marker)."""
    VISIBLE = "visible"
    AFTER_DUE_DATE = "after_due_date"
    HIDDEN = "hidden"


class TestStatus(str, enum.Enum):  # noqa: UP042 -- StrEnum would change str() and f-strings of a member
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Bug:
    """A diagnosed mistake: what it is, why it is wrong, how to fix it."""
    id: str
    title: str
    explanation: str
    fix: str
    variant: str | None = None
    evidence: str = ""          # what this submission did that shows it
    advice: bool = False        # worth no points unless an instructor weights it
    affects: tuple[str, ...] = ()  # the test groups whose points it costs

    def __post_init__(self):
        _sanitised(self, ("id", "title", "variant", "affects"))

    @property
    def label(self) -> str:
        """The id as shown next to the title ('wrong_scale (sqrt_dim)'); '' for a mistake a course
        named, whose id is the cluster's hash (course:cb3bf74079d), which tells a reader nothing."""
        if is_course_bug(self.id):
            return ""
        return self.id + (f" ({self.variant})" if self.variant else "")

    def to_dict(self) -> dict:
        d = {"id": self.id, "title": self.title, "explanation": self.explanation, "fix": self.fix,
             "evidence": self.evidence, "advice": self.advice}
        if self.variant:
            d["variant"] = self.variant
        if self.affects:
            d["affects"] = list(self.affects)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Bug:
        return cls(id=str(d["id"]), title=str(d.get("title", "")), explanation=str(d.get("explanation", "")),
                   fix=str(d.get("fix", "")), variant=d.get("variant") or None, evidence=str(d.get("evidence", "")),
                   advice=bool(d.get("advice")), affects=tuple(str(a) for a in d.get("affects") or ()))


@dataclass(frozen=True)
class TestResult:
    """One test case: its points and what went wrong."""
    id: str
    name: str
    group: str
    group_title: str
    status: TestStatus
    score: float
    max_score: float
    feedback: str = ""
    bugs: tuple[str, ...] = ()
    visibility: Visibility = Visibility.VISIBLE

    def __post_init__(self):
        _sanitised(self, ("id", "name", "group", "group_title", "bugs"))

    @property
    def function(self) -> str:
        """The test function the case belongs to: what a bug's `affects` names."""
        return self.group.rsplit("::", 1)[-1]

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "group": self.group, "status": self.status.value,
                # 9 digits: a course's shares (40 / 3) are kept, only float noise (1e-12) is cut
                "score": round(self.score, 9), "max_score": round(self.max_score, 9),
                "feedback": self.feedback, "bugs": list(self.bugs), "visibility": self.visibility.value}

    @classmethod
    def from_dict(cls, d: dict) -> TestResult:
        name = str(d.get("name", ""))
        return cls(id=str(d["id"]), name=name, group=str(d.get("group", "")), group_title=group_title(name),
                   status=TestStatus(d["status"]), score=float(d.get("score") or 0.0),
                   max_score=float(d.get("max_score") or 0.0), feedback=str(d.get("feedback", "")),
                   bugs=tuple(str(b) for b in d.get("bugs") or ()),
                   visibility=Visibility(d.get("visibility", Visibility.VISIBLE.value)))


@dataclass(frozen=True)
class Group:
    """The tests of one test function, summed: a row of the terminal table."""
    key: str
    title: str
    score: float
    max_score: float
    tests: tuple[TestResult, ...]

    @property
    def visibility(self) -> Visibility:
        """When students see the group (a course sets it per group; its cases share it)."""
        return self.tests[0].visibility


@dataclass(frozen=True)
class GradeResult:
    """Everything a grade produced; renders to the terminal, to native JSON, to platform formats."""
    exercise: str
    submission_name: str
    submission_sha256: str
    status: Status
    score: float | None
    max_score: float
    tests: tuple[TestResult, ...] = ()
    bugs: tuple[Bug, ...] = ()
    message: str = ""            # why it was rejected, or what failed
    diagnosis: str = ""          # the output is wrong and no known mistake explains it: where
    notes: tuple[str, ...] = ()  # sandbox notes (limits not enforced, ...)
    printed: str = ""            # the start of what the student's code printed
    duration_s: float = 0.0
    environment: dict = field(default_factory=dict)
    feedback: str = ""           # the readable text, as shown on the terminal
    withheld: str = ""           # in a visible part: what is not shown (hidden tests)
    cluster: str = ""            # failed, no mistake named: the id of its behaviour (grader.clusters)
    cluster_evidence: str = ""   # a cluster the course named: the diagnosis it replaces, for the instructor
    # Where the time went: (name, start, end) in seconds from the grade's start (sandbox.phases),
    # for `grade --profile` and the benchmark; a measurement only, which decides nothing.
    phases: tuple[tuple[str, float, float], ...] = field(default=(), compare=False)
    # The harness's raw report this result was scored from (None without one): a batch keeps it to
    # rescore under another course without a sandbox. Not part of the JSON.
    report: dict | None = field(default=None, compare=False, repr=False, metadata={"raw": True})

    def __post_init__(self):
        _sanitised(self, ("exercise", "submission_sha256"), names=("submission_name",))

    def groups(self) -> list[Group]:
        order: dict[str, list[TestResult]] = {}
        for test in self.tests:
            order.setdefault(test.group, []).append(test)
        return [Group(key, tests[0].group_title, round(sum(t.score for t in tests), 9),
                      round(sum(t.max_score for t in tests), 9), tuple(tests)) for key, tests in order.items()]

    def visible_part(self, released: tuple[str, ...] = ()) -> GradeResult:
        """What a student may see now: the visible tests and those of the `released` visibilities
        (grader.course: after the due date, or hidden ones once grades are out), and the bugs that
        cost points in them (or in no test at all), with the score of those tests."""
        shown = tuple(t if t.visibility is Visibility.VISIBLE else dataclasses.replace(t, visibility=Visibility.VISIBLE)
                      for t in self.tests if t.visibility is Visibility.VISIBLE or t.visibility.value in released)
        if len(shown) == len(self.tests) and shown == self.tests:
            return self
        hidden_groups = {t.function for t in self.tests} - {t.function for t in shown}
        bugs = tuple(b for b in self.bugs if not b.affects or not set(b.affects) <= hidden_groups)
        held = [t for t in self.tests if t.visibility is not Visibility.VISIBLE and t.visibility.value not in released]
        if not held:
            return dataclasses.replace(self, tests=shown)
        groups = len({t.group for t in held})  # as the table counts them: by group, not by case
        withheld = (f"{groups} more test group{'s' if groups > 1 else ''}, worth "
                    f"{points(sum(t.max_score for t in held))} points, "
                    f"{'are' if groups > 1 else 'is'} not shown yet.")
        return dataclasses.replace(self, tests=shown, bugs=bugs, withheld=withheld,
                                   score=None if self.score is None else round(sum(t.score for t in shown), 9),
                                   max_score=round(sum(t.max_score for t in shown), 9))

    @classmethod
    def from_dict(cls, d: dict) -> GradeResult:
        """The result back from its native JSON (a queue worker's answer, a stored result): what
        the service renders as a page or turns into a platform's format. Raises KeyError or
        ValueError for a document that is not a native result."""
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not a native result of schema {SCHEMA}: {d.get('schema')!r}")
        submission = d.get("submission") or {}
        return cls(exercise=str(d["exercise"]), submission_name=str(submission.get("name", "")),
                   submission_sha256=str(submission.get("sha256", "")), status=Status(d["status"]),
                   score=None if d.get("score") is None else float(d["score"]), max_score=float(d["max_score"]),
                   tests=tuple(TestResult.from_dict(t) for t in d.get("tests") or ()),
                   bugs=tuple(Bug.from_dict(b) for b in d.get("bugs") or ()), message=str(d.get("message", "")),
                   diagnosis=str(d.get("diagnosis", "")), notes=tuple(str(n) for n in d.get("notes") or ()),
                   duration_s=float(d.get("duration_s") or 0.0), environment=dict(d.get("environment") or {}),
                   feedback=str(d.get("feedback", "")), cluster=str(d.get("cluster") or ""),
                   cluster_evidence=str(d.get("cluster_evidence") or ""),
                   phases=tuple((str(p["name"]), float(p["start_s"]), float(p["end_s"]))
                                for p in d.get("phases") or () if isinstance(p, dict)))

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "exercise": self.exercise,
            "submission": {"name": self.submission_name, "sha256": self.submission_sha256},
            "status": self.status.value,
            "score": None if self.score is None else round(self.score, 4),
            "max_score": self.max_score,
            "tests": [t.to_dict() for t in self.tests],
            "bugs": [b.to_dict() for b in self.bugs],
            "feedback": self.feedback,
            "message": self.message,
            "diagnosis": self.diagnosis,
            "notes": list(self.notes),
            "duration_s": round(self.duration_s, 3),
            "environment": self.environment,
            **({"cluster": self.cluster} if self.cluster else {}),
            **({"cluster_evidence": self.cluster_evidence} if self.cluster_evidence else {}),
            **({"phases": [{"name": n, "start_s": round(a, 3), "end_s": round(b, 3)} for n, a, b in self.phases]}
               if self.phases else {}),
        }
