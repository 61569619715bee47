"""Fixtures shared by the single-head tests. `student` and `findings` come from the harness;
`student.function()` is the student's causal_attention, living in the worker."""
from __future__ import annotations

import pytest
import torch

from exercise.causal_attention_head.reference import random_qkv
from sandbox.proxy import StudentCodeError, WorkerFailure

GATE_CHANGE = 1e-7  # float64 answers of order 1: any real dependence moves them far more


@pytest.fixture(scope="session")
def attention_gate(student) -> str | None:
    """None when the function does attention's job, else why not. The property points are worth
    nothing without it: weights = torch.eye(T) have rows that sum to 1, zeros above the diagonal
    and are causal, and so is a running mean of v; NaN answers "change" with every input. So: the
    answers must be finite, the weights must change when the queries change and when the keys
    change, and the output when the values change."""
    q, k, v = random_qkv(2, 6, 4, seed=7)
    q2, k2, v2 = random_qkv(2, 6, 4, seed=8)
    try:
        (o, w), (_, wq), (_, wk), (ov, _) = student.function().map([(q, k, v), (q2, k, v), (q, k2, v), (q, k, v2)])
    except (StudentCodeError, WorkerFailure) as err:
        return f"it could not be run: {err}"
    if tuple(w.shape) != (2, 6, 6) or tuple(o.shape) != (2, 6, 4):
        return f"it returns shapes {tuple(o.shape)} and {tuple(w.shape)} for inputs of shape (2, 6, 4)"
    if not (torch.isfinite(o).all() and torch.isfinite(w).all()):
        return "its answers hold NaN or infinity for ordinary inputs of shape (2, 6, 4)"
    for what, changed, a, b in (("weights", "queries", wq, w), ("weights", "keys", wk, w), ("output", "values", ov, o)):
        if not (a.double() - b.double()).abs().nan_to_num(nan=1.0).max().item() > GATE_CHANGE:
            return f"its {what} do not change when the {changed} change"
    return None


@pytest.fixture
def gated(attention_gate) -> None:
    """Fail a property test when the function does not do attention's job."""
    if attention_gate:
        pytest.fail(f"no points for this property: your function does not do attention's job "
                    f"({attention_gate}). Row sums, zeros above the diagonal and causality only count "
                    f"for weights computed from the queries and the keys.")


@pytest.fixture(scope="session", autouse=True)
def diagnosis(request, student, findings):
    """Which known mistakes explain this submission (diagnosis.py), reported once per grade: the
    forbidden built-ins before the tests, the probes of what went wrong after them, and only if a
    test failed."""
    from exercise.causal_attention_head.diagnosis import complete, diagnose
    with student.side_allowance(timeouts=1):  # a hanging function must not use up the tests' allowance
        found = diagnose(student)
    yield found
    with student.side_allowance(timeouts=1):
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

