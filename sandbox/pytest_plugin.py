"""The pytest plugin the harness installs: the `student` fixture, points per test, verdicts."""
from __future__ import annotations

import pytest

from sandbox.proxy import Student, StudentCodeError, WorkerFailure


class Verdict:
    """Turns how a test ended into a status and feedback; unknown exceptions are grader faults."""

    @staticmethod
    def of(excinfo) -> tuple[str, str, bool]:
        if excinfo is None:
            return "passed", "", False
        err = excinfo.value
        if isinstance(err, WorkerFailure):
            return ("timeout" if err.kind in ("timeout", "budget") else "error"), err.message, False
        if isinstance(err, StudentCodeError):
            return "error", f"your code raised {err.describe()}", False
        if isinstance(err, (AssertionError, pytest.fail.Exception)):
            return "failed", str(getattr(err, "msg", None) or err), False
        if isinstance(err, pytest.skip.Exception):
            return "skipped", str(err.msg), False
        return "error", f"internal grader error: {type(err).__name__}: {err}", True


class Findings:
    """What an exercise's diagnosis found, carried into the report as plain data."""

    def __init__(self):
        self.bugs: list[dict] = []
        self.note: str | None = None
        self.skipped: list[str] = []  # probes the diagnosis could not run, for the grader's log

    def add(self, bug: dict) -> None:
        self.bugs.append(bug)


class HarnessPlugin:
    """Gives the tests their `student` fixture and records each test's points and verdict."""

    def __init__(self, student: Student):
        self._student = student
        self.collected = Findings()  # not `findings`: that name is the fixture below

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "points(n): the points a test group is worth, shared by its cases")
        config.addinivalue_line("markers", "visibility(when): who sees the test's result: 'visible' "
                                           "(default), 'after_due_date' or 'hidden'")

    @pytest.fixture(scope="session")
    def student(self) -> Student:
        return self._student

    @pytest.fixture(scope="session")
    def findings(self) -> Findings:
        return self.collected

    def pytest_collection_modifyitems(self, items):
        counts: dict[str, int] = {}
        for item in items:
            counts[_group(item)] = counts.get(_group(item), 0) + 1
        for item in items:
            marker = item.get_closest_marker("points")
            total = float(marker.args[0]) if marker else 0.0
            item.stash[_POINTS] = total / counts[_group(item)]

    def pytest_json_runtest_metadata(self, item, call):
        if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
            return {}
        status, feedback, internal = Verdict.of(call.excinfo)
        doc = (item.function.__doc__ or item.function.__name__).strip().splitlines()[0]
        bugs = [v for k, v in item.user_properties if k == "bug"]
        shown = item.get_closest_marker("visibility")
        return {"grade": {"group": _group(item), "group_title": doc, "points": item.stash[_POINTS],
                          "status": status, "feedback": feedback, "internal": internal,
                          "bugs": bugs, "case": getattr(item, "callspec", None) and item.callspec.id,
                          "visibility": shown.args[0] if shown else "visible"}}


_POINTS = pytest.StashKey[float]()


def _group(item) -> str:
    return f"{item.module.__name__.rsplit('.', 1)[-1]}::{item.originalname}"

