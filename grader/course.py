"""An instructor's course file: points, visibility and advice costs per test group, the time limit,
and names for clusters of mistakes outside the catalog, without touching the exercise's code.

    time_limit_s = 120
    [groups.test_values]                # a test function's name: grade exercises --groups NAME
    points = 40
    [groups.test_shape]
    points = 0
    visibility = "hidden"
    [advice.some_advice_id]             # a finding that is advice by default
    points = 2
    released = ["after_due_date"]       # what the students' pages show besides the visible groups
    [late]                              # a late policy (grader.term applies it in `grade batch`)
    due = 2026-12-01T23:59:00+01:00     # a TOML date-time with its offset (or Z)
    per_day = 10                        # percent of full marks off per day late, or part of a day
    cap = 50                            # percent off at most
    grace_minutes = 15                  # this late is on time
    [clusters.c1a2b3c4d5e]             # an id from the class report's clusters
    title = "The output is halved"
    fix = "Return self.proj(y) as it is."

The exercise's own markers stay the defaults. The course is applied on the host, to the raw
report (grader.scoring), so the sandbox and the tests never change with it: a course that changes
only points, visibility, advice or clusters can rescore a stored run (grader.batch); the time limit
changes what the sandbox runs, so it belongs to the run key.
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import exercise as exercises
from grader.errors import GraderError
from grader.result import Bug, TestResult, TestStatus, Visibility
from sandbox.contract import Group

VISIBILITIES = tuple(v.value for v in Visibility)
TOP_KEYS = ("time_limit_s", "released", "groups", "advice", "clusters", "late")
LATE_KEYS = ("due", "per_day", "cap", "grace_minutes")
MAX_GRACE_MINUTES = 7 * 24 * 60     # a week: more is no grace period but another due date
# What `released` may hold: the visibilities whose groups the students' feedback pages show (until
# then the pages leave them out and say how many points are not shown yet).
RELEASABLE = (Visibility.AFTER_DUE_DATE.value, Visibility.HIDDEN.value)
GROUP_KEYS = ("points", "visibility")
ADVICE_KEYS = ("points",)
CLUSTER_KEYS = ("title", "fix", "explanation", "match")
# The ranges a course's numbers must lie in: points of a group and the cost of an advice (a
# deduction larger than any course's full marks is a typo), and the grade's wall clock (an hour is
# far above any honest solution's seconds; beyond it the sandbox's timers overflow).
MAX_POINTS = 1000.0
TIME_LIMIT_S = (1.0, 3600.0)
CLUSTER_ID = re.compile(r"c[0-9a-f]{10}")   # grader.clusters.signature


class CourseError(GraderError, ValueError):
    """The course file is not valid; the message names the file, the key and its line."""


def check_number(value, *, low: float, high: float, what: str) -> float:
    """`value` as a float when it is a finite number within [low, high]; else a ValueError whose
    message says what it must be (`what`: its name as the user wrote it)."""
    if not _is_number(value) or not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{what} must be a number from {low:g} to {high:g} (got {value!r})")
    return float(value)


def check_time_limit(value, what: str = "time_limit_s") -> float:
    """A grade's wall clock in seconds, within TIME_LIMIT_S (the course file's and --time-limit's)."""
    return check_number(value, low=TIME_LIMIT_S[0], high=TIME_LIMIT_S[1], what=what)


def time_limit(exercise, given: float | None = None, course: Course | None = None) -> float:
    """The one place a grade's wall clock is decided, in seconds: the limit given (--time-limit, the
    queue's task, the service's request), else the course file's time_limit_s, else the exercise's
    own (`exercise`: its name or the Exercise)."""
    if given is not None:
        return float(given)
    if course is not None and course.time_limit_s is not None:
        return course.time_limit_s
    return (exercises.get(exercise) if isinstance(exercise, str) else exercise).limits.wall_s


def full_marks(exercise, course: Course | None = None) -> float:
    """The one place a grade's full marks are decided: the course's points, else the exercise's
    (`exercise`: its name or the Exercise)."""
    ex = exercises.get(exercise) if isinstance(exercise, str) else exercise
    return course.max_score(ex) if course is not None else ex.max_score


@dataclass(frozen=True)
class ClusterName:
    """An instructor's name for a cluster of unexplained mistakes: attached to every member."""
    id: str              # the id its members' findings carry: course:<id>
    match: str           # the cluster id of the class report it names
    title: str
    fix: str
    explanation: str = ""


@dataclass(frozen=True)
class LatePolicy:
    """When the work is due and what lateness costs, in percent of full marks."""
    due: datetime.datetime       # aware
    per_day: float = 0.0         # percent off per day late (a part of a day counts as a day)
    cap: float = 100.0           # percent off at most
    grace_s: float = 0.0         # this late after the due date (and any extension) is on time


@dataclass(frozen=True)
class Course:
    name: str                                    # the file as given on the command line
    sha256: str
    time_limit_s: float | None = None
    points: dict[str, float] = field(default_factory=dict)        # group -> points
    visibility: dict[str, str] = field(default_factory=dict)      # group -> visible|hidden|after_due_date
    advice: dict[str, float] = field(default_factory=dict)        # advice id -> the points it costs
    clusters: tuple[ClusterName, ...] = ()
    released: tuple[str, ...] = ()                                # visibilities the students' pages show
    late: LatePolicy | None = None                                # applied to a batch's gradebook (grader.term)

    def environment(self) -> dict:
        return {"course": {"path": self.name, "sha256": self.sha256}}

    def score_key(self) -> str:
        """What the course changes in a score and nothing else (the time limit is the run's)."""
        return json.dumps([self.sha256, sorted(self.points.items()), sorted(self.visibility.items()),
                           sorted(self.advice.items()), [dataclasses.astuple(c) for c in self.clusters],
                           sorted(self.released)])

    def max_score(self, exercise) -> float:
        """Full marks under this course (its deductions aside)."""
        return round(sum(self.points.get(name, g.points) for name, g in test_groups(exercise).items()), 9)

    # --- applied to a scored report -----------------------------------------------------------

    def apply_tests(self, tests: tuple[TestResult, ...]) -> tuple[TestResult, ...]:
        """The tests with this course's points and visibility. A group's new points are shared by
        its cases in the proportion the exercise shared them (equally when it gave none)."""
        totals: dict[str, list[float]] = {}
        for t in tests:
            totals.setdefault(t.function, []).append(t.max_score)
        out = []
        for t in tests:
            changes: dict[str, Any] = {}
            if t.function in self.points:
                old = sum(totals[t.function])
                share = t.max_score / old if old > 0 else 1 / len(totals[t.function])
                # Unrounded: cases rounded one by one add up to 88.000000002; the sums are rounded.
                most = self.points[t.function] * share
                changes.update(max_score=most, score=most if t.status is TestStatus.PASSED else 0.0)
            if t.function in self.visibility:
                changes["visibility"] = Visibility(self.visibility[t.function])
            out.append(dataclasses.replace(t, **changes) if changes else t)
        return tuple(out)

    def advice_costs(self, bugs: tuple[Bug, ...]) -> tuple[tuple[Bug, ...], tuple[TestResult, ...]]:
        """Advice this course gives a cost becomes a mistake, with a deduction: a test of its own
        worth 0 that scores minus the cost, so the score still is the sum of the tests."""
        tests, out = [], []
        for bug in bugs:
            cost = self.advice.get(bug.id, 0.0) if bug.advice else 0.0
            if cost <= 0:
                out.append(bug)
                continue
            group = f"course::{bug.id}"
            title = f"Deducted by the course: {bug.title}"
            tests.append(TestResult(id=f"{group}::deduction", name=title, group=group, group_title=title,
                                    status=TestStatus.FAILED, score=-cost, max_score=0.0,
                                    feedback=f"this course deducts {cost:g} points for it: {bug.fix}",
                                    bugs=(bug.id,)))
            out.append(dataclasses.replace(bug, advice=False, affects=(*bug.affects, bug.id)))
        return tuple(out), tuple(tests)

    def check_clusters(self, known: set[str]) -> None:
        """Refuse a [clusters.ID] that names none of the class's clusters (`known`), listing them."""
        for cluster in self.clusters:
            if cluster.match not in known:
                listed = ", ".join(sorted(known)) or "none (no submission lost points to an unnamed mistake)"
                raise CourseError(f"{self.name}{_line_of(self, cluster)}: [clusters.{cluster.id}] names no cluster of "
                                  f"this class; its clusters: {listed}")

    def cluster_name(self, cluster_id: str) -> ClusterName | None:
        return next((c for c in self.clusters if c.match == cluster_id), None)


# --- reading a course file ------------------------------------------------------------------------

def load(path: Path, exercise) -> Course:
    """Read and check a course file against the exercise; raises CourseError naming key and line."""
    doc, text, sha256 = read_toml(path, "course file", CourseError)
    return _parse(doc, text, str(path), sha256, exercise)


def read_toml(path: Path, what: str, error: type[Exception]) -> tuple[dict, str, str]:
    """An instructor's TOML file (`what` names it in errors, raised as `error`): its document, its
    text (for the line of a key) and the sha256 of its bytes."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise error(f"cannot read the {what} {path}: {err.strerror or err}") from err
    text = data.decode("utf-8-sig", errors="replace")  # a BOM (Windows editors write one) is no TOML
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise error(f"{path}: not valid TOML: {err}") from err
    return doc, text, hashlib.sha256(data).hexdigest()


def _parse(doc: dict, text: str, name: str, sha256: str, exercise) -> Course:
    where = Locator(text, name)
    groups = test_groups(exercise)
    advice_ids = advice_findings(exercise)
    _only(doc, TOP_KEYS, (), where)
    limit = doc.get("time_limit_s")
    if limit is not None:
        try:
            limit = check_time_limit(limit, "time_limit_s (seconds)")
        except ValueError as err:
            raise where.error(("time_limit_s",), str(err)) from None
    released = doc.get("released", [])
    if not isinstance(released, list) or not all(isinstance(v, str) and v in RELEASABLE for v in released):
        raise where.error(("released",), f"released must be a list of {' and '.join(map(repr, RELEASABLE))} "
                                         f"(got {released!r})")
    points, visibility = {}, {}
    for group, settings in _entries(doc, "groups", GROUP_KEYS, where, known=groups,
                                    unknown=f"the exercise's test groups: {', '.join(groups)} "
                                            f"(see `grade exercises --groups {exercise.name}`)"):
        if "points" in settings:
            points[group] = _points(settings["points"], ("groups", group, "points"), where)
        if "visibility" in settings:
            if settings["visibility"] not in VISIBILITIES:
                raise where.error(("groups", group, "visibility"), f"[groups.{group}] visibility must be one of "
                                  f"{', '.join(VISIBILITIES)} (got {settings['visibility']!r})")
            visibility[group] = settings["visibility"]
    advice = {}
    for bug_id, settings in _entries(doc, "advice", ADVICE_KEYS, where, known=advice_ids,
                                     unknown=f"the findings that are advice by default: {', '.join(advice_ids) or 'none'}"):
        if "points" in settings:
            advice[bug_id] = _points(settings["points"], ("advice", bug_id, "points"), where)
    clusters = []
    for cluster_id, settings in _entries(doc, "clusters", CLUSTER_KEYS, where):
        match = settings.get("match", cluster_id)
        if not isinstance(match, str) or not CLUSTER_ID.fullmatch(match):
            place = ("clusters", cluster_id, "match") if "match" in settings else ("clusters", cluster_id)
            named = f"[clusters.{cluster_id}] match" if "match" in settings else f"[clusters.{cluster_id}]"
            raise where.error(place, f"{named} names no cluster: a cluster id is c and 10 hex digits, as the class "
                                   f"report's clusters show them (got {match!r})")
        for key in ("title", "fix"):
            if not isinstance(settings.get(key), str) or not settings[key].strip():
                raise where.error(("clusters", cluster_id, key) if key in settings else ("clusters", cluster_id),
                                  f"[clusters.{cluster_id}] needs {key} = \"...\" (a non-empty string)")
        for key in ("explanation",):
            if key in settings and not isinstance(settings[key], str):
                raise where.error(("clusters", cluster_id, key), f"[clusters.{cluster_id}] {key} must be a string")
        clusters.append(ClusterName(id=cluster_id, match=settings.get("match", cluster_id),
                                    title=settings["title"].strip(), fix=settings["fix"].strip(),
                                    explanation=settings.get("explanation", "").strip()))
    course = Course(name=name, sha256=sha256, time_limit_s=limit, points=points, visibility=visibility,
                    advice=advice, clusters=tuple(clusters), released=tuple(dict.fromkeys(released)),
                    late=_late(doc, where))
    if points and course.max_score(exercise) <= 0:
        raise where.error(("groups",), "the test groups' points add up to 0: every grade would be 0 / 0; give "
                                       "at least one group points")
    return course


def _late(doc: dict, where: Locator) -> LatePolicy | None:
    """The [late] table: a due date with its offset and numbers each within its range."""
    if "late" not in doc:
        return None
    table = doc["late"]
    if not isinstance(table, dict):
        raise where.error(("late",), "late must be a table: [late] with due = 2026-12-01T23:59:00+01:00")
    _only(table, LATE_KEYS, ("late",), where)
    due = table.get("due")
    if not isinstance(due, datetime.datetime) or due.tzinfo is None:
        raise where.error(("late", "due") if "due" in table else ("late",),
                          "[late] due must be a date and time with its offset, e.g. 2026-12-01T23:59:00+01:00 or "
                          f"...T22:59:00Z (got {due!r})")
    numbers = {}
    for key, low, high, default in (("per_day", 0, 100, 0.0), ("cap", 0, 100, 100.0),
                                    ("grace_minutes", 0, MAX_GRACE_MINUTES, 0.0)):
        if key not in table:
            numbers[key] = default
            continue
        try:
            numbers[key] = check_number(table[key], low=low, high=high, what=f"[late] {key}")
        except ValueError as err:
            raise where.error(("late", key), str(err)) from None
    return LatePolicy(due=due, per_day=numbers["per_day"], cap=numbers["cap"], grace_s=numbers["grace_minutes"] * 60)


def _line_of(course: Course, cluster: ClusterName) -> str:
    try:
        line = Locator(Path(course.name).read_text(encoding="utf-8-sig"), course.name).line(("clusters", cluster.id))
    except (OSError, UnicodeDecodeError):
        line = None
    return f" line {line}" if line else ""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _points(value, key: tuple[str, ...], where: Locator) -> float:
    try:
        return check_number(value, low=0, high=MAX_POINTS, what=f"[{'.'.join(key[:-1])}] points")
    except ValueError as err:
        raise where.error(key, str(err)) from None


def _entries(doc: dict, name: str, allowed: tuple[str, ...], where: Locator, known=None, unknown: str = ""):
    """(NAME, settings) of each [name.NAME] table, NAME among `known` (when given), its keys among `allowed`."""
    value = doc.get(name, {})
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise where.error((name,), f"{name} must hold tables: [{name}.NAME]")
    for key, settings in value.items():
        if known is not None and key not in known:
            raise where.error((name, key), f"unknown [{name}.{key}]; {unknown}")
        _only(settings, allowed, (name, key), where)
        yield key, settings


def _only(table: dict, allowed: tuple[str, ...], at: tuple[str, ...], where: Locator) -> None:
    for key in table:
        if key not in allowed:
            place = f" in [{'.'.join(at)}]" if at else ""
            raise where.error((*at, key), f"unknown key {key!r}{place}; known: {', '.join(allowed)}")


class Locator:
    """Finds the line of a key in the course file's text: tomllib gives values, not lines."""
    _HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_.\-\"' ]+?)\s*=")

    def __init__(self, text: str, name: str):
        self.lines, self.name = text.splitlines(), name

    def error(self, key: tuple[str, ...], message: str) -> CourseError:
        line = self.line(key)
        return CourseError(f"{self.name}{f' line {line}' if line else ''}: {message}")

    def line(self, key: tuple[str, ...]) -> int | None:
        """The line that defines `key`: a header [a.b] for a table, a `k = ` line under its table
        (or a dotted `b.k = ` under a parent)."""
        table: tuple[str, ...] = ()
        for number, raw in enumerate(self.lines, 1):
            header = self._HEADER.match(raw)
            if header:
                table = _split(header.group(1))
                if table[:len(key)] == key:  # the table itself, or the first within it
                    return number
                continue
            assigned = self._KEY.match(raw)
            if assigned and (*table, *_split(assigned.group(1))) [:len(key)] == key:
                return number
        return None


_KEY_PART = re.compile(r"\s*(?:\"[^\"]*\"|'[^']*'|[^.\"']+)\s*")


def _split(dotted: str) -> tuple[str, ...]:
    """A dotted TOML key's parts; a quoted part keeps its dots ("alice.py")."""
    return tuple(part.strip().strip("\"'") for part in _KEY_PART.findall(dotted) if part.strip())


# --- what an exercise declares --------------------------------------------------------------------

def test_groups(exercise) -> dict[str, Group]:
    """The exercise's test groups with their default points and visibility, as it declares them
    (Exercise.groups): the host neither imports nor parses its tests."""
    return {g.name: g for g in exercise.groups}


def advice_findings(exercise: exercises.Exercise) -> tuple[str, ...]:
    """The ids of the exercise's findings that are advice by default (its catalog's `advice`)."""
    return tuple(sorted(bug_id for bug_id, info in exercise.catalog.items() if info.advice))
