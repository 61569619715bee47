"""The pytest plugin the harness installs: the `student` fixture, points per test, verdicts."""
from __future__ import annotations

import os
import time

import pytest

from sandbox.kit import Draws
from sandbox.limits import HarnessLimit
from sandbox.phases import Clock
from sandbox.protocol import bounded
from sandbox.failures import BadAnswer, StudentCodeError, WorkerFailure
from sandbox.proxy import Student

MAX_FEEDBACK = 4000


class Verdict:
    """Turns how a test ended into a status and feedback. An exception the test did not expect is
    the student's when the test was handling what the student's code sent (any answer came back
    during the test, or the harness hit its own limits on it): that test fails and says so. Only
    one raised before any answer is a grader fault."""

    @staticmethod
    def of(excinfo, handled_answers: bool = False) -> tuple[str, str, bool]:
        if excinfo is None:
            return "passed", "", False
        err = excinfo.value
        if isinstance(err, WorkerFailure):
            return ("timeout" if err.kind in ("timeout", "budget") else "error"), bounded(err.message, MAX_FEEDBACK), False
        if isinstance(err, BadAnswer):
            return "failed", err.describe(), False
        if isinstance(err, StudentCodeError):
            return "error", bounded(f"your code raised {err.describe()}", MAX_FEEDBACK), False
        if isinstance(err, (AssertionError, pytest.fail.Exception)):
            return "failed", bounded(getattr(err, "msg", None) or err, MAX_FEEDBACK), False
        if isinstance(err, pytest.skip.Exception):
            return "skipped", bounded(err.msg, MAX_FEEDBACK), False
        text = bounded(f"{type(err).__name__}: {_text(err)}", 1000)
        if isinstance(err, MemoryError):
            return "failed", ("the grader stopped checking your code: it ran into its own memory limit "
                              "handling what your code sent or your source"), False
        if isinstance(err, (HarnessLimit, RecursionError)):
            return "failed", f"the grader stopped checking your code: {text}", False
        if handled_answers or getattr(err, "_on_student_data", False):
            try:  # a session fixture's exception is raised again in later tests: it stays the student's
                err._on_student_data = True
            except AttributeError:
                pass
            return "failed", (f"your code's answers could not be checked: {text}. The test received them "
                              f"from your code; answers whose dtype, shape or values are not those of the "
                              f"input (or change from one call to the next) cannot be compared"), False
        return "error", f"internal grader error: {text}", True


def _text(err: BaseException) -> str:
    try:
        return str(err)
    except Exception:  # noqa: BLE001  (a message built from the student's data may not even print)
        return "<unprintable>"


class Findings:
    """What an exercise's diagnosis found, carried into the report as plain data."""

    def __init__(self):
        self.bugs: list[dict] = []
        self.note: str | None = None
        self.skipped: list[str] = []  # probes the diagnosis could not run, for the grader's log

    def add(self, bug: dict) -> None:
        self.bugs.append(bug)


class HarnessPlugin:
    """Gives the tests their `student` and `draws` fixtures and records each test's points and
    verdict. `seed`: the host's seed of the grade's draws (HarnessJob.seed); without one (a harness
    run by hand), a random one: no draw can then be foreseen, nor repeated."""

    def __init__(self, student: Student, seed: str = "", clock: Clock | None = None):
        self._student = student
        self._draws = Draws(seed or os.urandom(32).hex())
        self.collected = Findings()  # not `findings`: that name is the fixture below
        self.clock = clock or Clock()
        self._files: dict[str, list[float]] = {}  # test file -> [first start, last end]

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "points(n): the points a test group is worth, shared by its cases")
        config.addinivalue_line("markers", "visibility(when): who sees the test's result: 'visible' "
                                           "(default), 'after_due_date' or 'hidden'")

    @pytest.fixture(scope="session")
    def student(self) -> Student:
        return self._student

    @pytest.fixture(scope="session")
    def draws(self) -> Draws:
        """Every input, shape order and weight the tests use, drawn from the host's seed."""
        return self._draws

    @pytest.fixture(scope="session")
    def findings(self) -> Findings:
        return self.collected

    @pytest.fixture(scope="session")
    def phases(self) -> Clock:
        """The grade's clock: `with phases.span("diagnosis"):` shows a step in `grade --profile`."""
        return self.clock

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session):
        with self.clock.span("collection"):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        start = time.monotonic()
        try:
            return (yield)
        finally:
            span = self._files.setdefault(_file(item), [start, start])
            span[1] = time.monotonic()

    def pytest_sessionfinish(self, session):
        for name, (start, end) in self._files.items():
            self.clock.add(f"tests {name}", start, end)

    def pytest_collection_modifyitems(self, items):
        counts: dict[str, int] = {}
        for item in items:
            counts[_group(item)] = counts.get(_group(item), 0) + 1
        for item in items:
            marker = item.get_closest_marker("points")
            total = float(marker.args[0]) if marker else 0.0
            item.stash[_POINTS] = total / counts[_group(item)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        item.stash[_ANSWERS] = self._student.answers
        if time.monotonic() >= self._student.deadline:  # the rest fail at once, and the report goes out
            pytest.fail(f"not run: the grade's time limit ({self._student.limits.wall_s:g} s) was reached")

    def pytest_json_runtest_metadata(self, item, call):
        if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
            return {}
        handled = self._student.answers > item.stash.get(_ANSWERS, self._student.answers)
        status, feedback, internal = Verdict.of(call.excinfo, handled_answers=handled)
        doc = (item.function.__doc__ or item.function.__name__).strip().splitlines()[0]
        bugs = [v for k, v in item.user_properties if k == "bug"]
        shown = item.get_closest_marker("visibility")
        return {"grade": {"group": _group(item), "group_title": doc, "points": item.stash[_POINTS],
                          "status": status, "feedback": feedback, "internal": internal,
                          "bugs": bugs, "case": getattr(item, "callspec", None) and item.callspec.id,
                          "visibility": shown.args[0] if shown else "visible"}}


_POINTS = pytest.StashKey[float]()
_ANSWERS = pytest.StashKey[int]()  # the student's answers received before the test started


def _file(item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1]


def _group(item) -> str:
    return f"{_file(item)}::{item.originalname}"

