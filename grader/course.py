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
    [clusters.c1a2b3c4d5]              # an id from the class report's clusters
    title = "The output is halved"
    fix = "Return self.proj(y) as it is."

The exercise's own markers stay the defaults. The course is applied on the host, to the raw
report (grader.scoring), so the sandbox and the tests never change with it: a course that changes
only points, visibility, advice or clusters can rescore a stored run (grader.batch); the time limit
changes what the sandbox runs, so it belongs to the run key.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.result import Bug, TestResult, TestStatus, Visibility

VISIBILITIES = tuple(v.value for v in Visibility)
TOP_KEYS = ("time_limit_s", "groups", "advice", "clusters")
GROUP_KEYS = ("points", "visibility")
ADVICE_KEYS = ("points",)
CLUSTER_KEYS = ("title", "fix", "explanation", "match")


class CourseError(ValueError):
    """The course file is not valid; the message names the key and its line."""


@dataclass(frozen=True)
class GroupInfo:
    """A test group of the exercise as its code declares it: what a course may override."""
    name: str            # the test function's name
    title: str           # its docstring's first line
    points: float
    visibility: str


@dataclass(frozen=True)
class ClusterName:
    """An instructor's name for a cluster of unexplained mistakes: attached to every member."""
    id: str              # the id its members' findings carry: course:<id>
    match: str           # the cluster id of the class report it names
    title: str
    fix: str
    explanation: str = ""


@dataclass(frozen=True)
class Course:
    name: str                                    # the file as given on the command line
    sha256: str
    time_limit_s: float | None = None
    points: dict[str, float] = field(default_factory=dict)        # group -> points
    visibility: dict[str, str] = field(default_factory=dict)      # group -> visible|hidden|after_due_date
    advice: dict[str, float] = field(default_factory=dict)        # advice id -> the points it costs
    clusters: tuple[ClusterName, ...] = ()

    def environment(self) -> dict:
        return {"course": {"path": self.name, "sha256": self.sha256}}

    def score_key(self) -> str:
        """What the course changes in a score and nothing else (the time limit is the run's)."""
        return json.dumps([self.sha256, sorted(self.points.items()), sorted(self.visibility.items()),
                           sorted(self.advice.items()), [dataclasses.astuple(c) for c in self.clusters]])

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
            changes = {}
            if t.function in self.points:
                old = sum(totals[t.function])
                share = t.max_score / old if old > 0 else 1 / len(totals[t.function])
                most = round(self.points[t.function] * share, 9)
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

    def cluster_name(self, cluster_id: str) -> ClusterName | None:
        return next((c for c in self.clusters if c.match == cluster_id), None)


# --- reading a course file ------------------------------------------------------------------------

def load(path: Path, exercise) -> Course:
    """Read and check a course file against the exercise; raises CourseError naming key and line."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CourseError(f"cannot read the course file {path}: {err.strerror or err}") from err
    text = data.decode("utf-8", errors="replace")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise CourseError(f"{path}: not valid TOML: {err}") from err
    return _parse(doc, text, str(path), hashlib.sha256(data).hexdigest(), exercise)


def _parse(doc: dict, text: str, name: str, sha256: str, exercise) -> Course:
    where = _Locator(text, name)
    groups = test_groups(exercise)
    advice_ids = advice_findings(exercise)
    _only(doc, TOP_KEYS, (), where)
    limit = doc.get("time_limit_s")
    if limit is not None and not (_is_number(limit) and limit >= 1):
        raise where.error(("time_limit_s",), f"time_limit_s must be a number of seconds, at least 1 (got {limit!r})")
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
        for key in ("title", "fix"):
            if not isinstance(settings.get(key), str) or not settings[key].strip():
                raise where.error(("clusters", cluster_id, key) if key in settings else ("clusters", cluster_id),
                                  f"[clusters.{cluster_id}] needs {key} = \"...\" (a non-empty string)")
        for key in ("explanation", "match"):
            if key in settings and not isinstance(settings[key], str):
                raise where.error(("clusters", cluster_id, key), f"[clusters.{cluster_id}] {key} must be a string")
        clusters.append(ClusterName(id=cluster_id, match=settings.get("match", cluster_id),
                                    title=settings["title"].strip(), fix=settings["fix"].strip(),
                                    explanation=settings.get("explanation", "").strip()))
    return Course(name=name, sha256=sha256, time_limit_s=float(limit) if limit is not None else None,
                  points=points, visibility=visibility, advice=advice, clusters=tuple(clusters))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _points(value, key: tuple[str, ...], where: _Locator) -> float:
    if not (_is_number(value) and value >= 0):
        raise where.error(key, f"[{'.'.join(key[:-1])}] points must be a number, 0 or more (got {value!r})")
    return float(value)


def _entries(doc: dict, name: str, allowed: tuple[str, ...], where: _Locator, known=None, unknown: str = ""):
    """(NAME, settings) of each [name.NAME] table, NAME among `known` (when given), its keys among `allowed`."""
    value = doc.get(name, {})
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise where.error((name,), f"{name} must hold tables: [{name}.NAME]")
    for key, settings in value.items():
        if known is not None and key not in known:
            raise where.error((name, key), f"unknown [{name}.{key}]; {unknown}")
        _only(settings, allowed, (name, key), where)
        yield key, settings


def _only(table: dict, allowed: tuple[str, ...], at: tuple[str, ...], where: _Locator) -> None:
    for key in table:
        if key not in allowed:
            place = f" in [{'.'.join(at)}]" if at else ""
            raise where.error((*at, key), f"unknown key {key!r}{place}; known: {', '.join(allowed)}")


class _Locator:
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


def _split(dotted: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in dotted.split("."))


# --- what an exercise declares --------------------------------------------------------------------

def test_groups(exercise) -> dict[str, GroupInfo]:
    """The exercise's test groups with their default points and visibility, read from the test
    files' source (their `points` and `visibility` markers), so the host imports none of them."""
    return dict(_groups_in(exercise.tests_dir))


@functools.lru_cache(maxsize=16)
def _groups_in(tests_dir: Path) -> tuple[tuple[str, GroupInfo], ...]:
    """Parsed once per process: a rescore of a class asks for every submission."""
    groups = {}
    for path in sorted(tests_dir.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
                continue
            marks = {m.func.attr: m.args for m in node.decorator_list
                     if isinstance(m, ast.Call) and isinstance(m.func, ast.Attribute)}
            points = marks.get("points") or [ast.Constant(0)]
            shown = marks.get("visibility") or [ast.Constant("visible")]
            doc = (ast.get_docstring(node) or node.name).strip().splitlines()[0]
            groups[node.name] = GroupInfo(node.name, doc, float(ast.literal_eval(points[0])),
                                          str(ast.literal_eval(shown[0])))
    return tuple(groups.items())


def advice_findings(exercise) -> tuple[str, ...]:
    """The ids of the exercise's findings that are advice by default (its catalog's `advice`)."""
    try:
        catalog = importlib.import_module(f"exercise.{exercise.directory.name}.catalog").CATALOG
    except (ImportError, AttributeError):
        return ()
    return tuple(sorted(bug_id for bug_id, info in catalog.items() if getattr(info, "advice", False)))
