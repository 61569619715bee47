"""Fixtures shared by the single-head tests. `student`, `draws` and `findings` come from the
harness; `student.function()` is the student's causal_attention, living in the worker. Every
input is drawn from the grade's seed (`draws`, sandbox.kit.Draws), which the student's code never
sees, from one family of shapes (checks.CASES) in an order drawn too: no input can be told from
another by its seed, shape, dtype or place in the run."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def diagnosis(request, student, findings, phases):
    """Which known mistakes explain this submission (diagnosis.py), reported once per grade: the
    forbidden built-ins before the tests, the probes of what went wrong after them, and only if a
    test failed."""
    from exercise.causal_attention_head.diagnosis import complete, diagnose
    with student.side_allowance(timeouts=1), phases.span("diagnosis: before the tests"):
        found = diagnose(student)  # a hanging function must not use up the tests' allowance
    yield found
    with student.side_allowance(timeouts=1), phases.span("diagnosis: after the tests"):
        complete(found, student, failed=request.session.testsfailed > 0)
    for finding in found.findings:
        findings.add(finding)
    findings.note = found.unexplained
    findings.skipped = found.skipped


def _fail_if_delegated(student) -> None:
    from exercise.causal_attention_head.diagnosis import Diagnosis, forbidden
    found = Diagnosis()
    forbidden(student, found)
    if found.findings:
        pytest.fail("no points: your function delegates to PyTorch's attention "
                    f"({found.findings[0]['evidence']}); the exercise is to write attention yourself")


@pytest.fixture
def written_by_hand(student) -> None:
    """The comparison tests give no points to a function that calls SDPA or MultiheadAttention:
    checked before the test, and again after it (pytest_runtest_call below), since the count
    covers every call of every test."""
    _fail_if_delegated(student)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if "written_by_hand" in item.fixturenames:
        _fail_if_delegated(item.funcargs["student"])
    return result

