"""Fixtures shared by the causal self-attention tests. `student` comes from the harness.

Property tests (causality, padding properties, parameter count) run the student's module with its
own initial weights: a property does not depend on the weight values, and a module whose layers
are laid out wrongly still shows whether it is causal.
"""
from __future__ import annotations

import itertools

import pytest
import torch

from exercise.causal_self_attention.checks import random_input
from exercise.causal_self_attention.reference import random_weights
from sandbox.proxy import StudentCodeError, WorkerFailure


@pytest.fixture(scope="session")
def attention_gate(student) -> str | None:
    """None when the module does attention's job, else why not. Property points are worth nothing
    without it: `return x` is causal, a module that ignores its input has the right parameter
    count, and a running mean of v is causal and mixes the past without attending at all. So:
    - each output depends on its own input and on every earlier one;
    - the output is not an affine function of the input (softmax weights are not);
    - with the grader's weights in the stated layout, the output depends on the queries and on
      the keys (the q and the k rows of qkv), and as scores q.k do: with one of the two zero,
      the other no longer matters. Any order of q, k, v inside the layer (blocks in any order, or
      interleaved per head) passes; a layer whose output ignores q or k does not."""
    problem = _mixes_past(student)
    if problem is None:
        problem = _not_affine(student)
    if problem is None:
        problem = _scores_from_queries_and_keys(student)
    return problem


def _mixes_past(student) -> str | None:
    dim, B, T = 24, 2, 6
    try:
        module = student.new(dim, 4)
        x = random_input(B, T, dim, seed=7)
        noise = random_input(B, T, dim, seed=8)
        moved = [x.clone() for _ in range(T)]
        for s in range(T):
            moved[s][:, s] += noise[:, s]
        base, *outs = module.map([(x,)] + [(m,) for m in moved])
        if any(tuple(o.shape) != (B, T, dim) for o in [base, *outs]):
            return f"its output has shape {tuple(base.shape)} for an input of shape {(B, T, dim)}"
        for s, out in enumerate(outs):
            change = (out.double() - base.double()).abs().nan_to_num(nan=1.0).amax(dim=(0, 2))    # (T,)
            if change[s] <= 1e-9:
                return f"the output at position {s} does not depend on the input at position {s}"
            blind = [t for t in range(s + 1, T) if change[t] <= 1e-9]
            if blind:
                return (f"the output at position {blind[0]} does not depend on the earlier input "
                        f"at position {s}")
    except (StudentCodeError, WorkerFailure) as err:
        return f"its forward could not be run: {err}"
    return None


GATE_CHANGE = 1e-7  # float64 outputs of order 1: any real dependence moves them far more


def _not_affine(student) -> str | None:
    dim, B, T = 24, 2, 6
    try:
        module = student.new(dim, 4)
        x, y = random_input(B, T, dim, seed=9), random_input(B, T, dim, seed=10)
        fx, fy, fxy, f0 = module.map([(x,), (y,), (x + y,), (torch.zeros_like(x),)])
        if any(tuple(o.shape) != (B, T, dim) for o in (fx, fy, fxy, f0)):
            return f"its output has shape {tuple(fx.shape)} for an input of shape {(B, T, dim)}"
        gap = (fxy.double() - fx.double() - fy.double() + f0.double()).abs().nan_to_num(nan=1.0).max().item()
        if gap <= GATE_CHANGE:
            return ("its output is an affine function of its input (f(x + y) - f(x) - f(y) + f(0) = 0): "
                    "it mixes positions with fixed weights, where attention's weights depend on the input")
    except (StudentCodeError, WorkerFailure) as err:
        return f"its forward could not be run: {err}"
    return None


def _row_layouts(dim: int, heads: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(q rows, k rows) of qkv under the stated layout first, then the other orders a layer may
    split qkv's output in (any order of the three blocks, or q, k, v interleaved per head): a
    layer that attends with its q, k and v in another order still attends (qkv_order costs the
    comparison's points, not the properties')."""
    blocks = [torch.arange(i * dim, (i + 1) * dim) for i in range(3)]
    layouts = [(blocks[a], blocks[b]) for a, b in itertools.permutations(range(3), 2)]
    hd = dim // heads
    per_head = torch.arange(3 * dim).reshape(heads, 3, hd)
    layouts.append((per_head[:, 0].flatten(), per_head[:, 1].flatten()))
    return layouts


def _scores_from_queries_and_keys(student) -> str | None:
    dim, heads, B, T = 24, 4, 2, 6
    try:
        module = student.new(dim, heads)
        if module.params.get("qkv.weight") != (3 * dim, dim):
            return None  # not the stated layout: the interface tests say so; the checks above stand
        base = {k: v for k, v in random_weights(dim, seed=31).items()
                if module.params.get(k) == tuple(v.shape)}
        other = random_weights(dim, seed=32)
        x = random_input(B, T, dim, seed=33)
        first = None
        for q_rows, k_rows in _row_layouts(dim, heads):
            problem = _scores_problem(module, base, other, x, q_rows, k_rows)
            if problem is None:
                return None
            first = first or problem
        return first
    except (StudentCodeError, WorkerFailure) as err:
        return f"its forward could not be run with the grader's weights: {err}"


def _scores_problem(module, base: dict, other: dict, x: torch.Tensor, q_rows, k_rows) -> str | None:
    """None when, with these rows of qkv as the queries and the keys, the output follows both as
    scores q.k do."""
    B, T, dim = x.shape

    def variant(**rows) -> dict:
        weights = {k: v.clone() for k, v in base.items()}
        for name, how in rows.items():
            part = q_rows if name == "q" else k_rows
            for key in ("qkv.weight", "qkv.bias"):
                if key in weights:
                    weights[key][part] = 0 if how == "zero" else other[key][part]
        return weights
    outs = []
    for weights in (variant(), variant(q="new"), variant(k="new"), variant(q="zero"),
                    variant(q="zero", k="new"), variant(k="zero"), variant(k="zero", q="new")):
        module.set_params(weights)
        outs.append(module(x).double())
    if any(tuple(o.shape) != (B, T, dim) for o in outs):
        return f"its output has shape {tuple(outs[0].shape)} for an input of shape {(B, T, dim)}"
    base_out, new_q, new_k, q0, q0_new_k, k0, k0_new_q = outs

    def moved(a, b) -> bool:
        return (a - b).abs().nan_to_num(nan=1.0).max().item() > GATE_CHANGE
    if not moved(new_q, base_out):
        return "its output does not change when only the queries change (the q rows of qkv)"
    if not moved(new_k, base_out):
        return "its output does not change when only the keys change (the k rows of qkv)"
    if moved(q0_new_k, q0) and moved(k0_new_q, k0):
        return ("its output depends on the queries and the keys, but not through scores q.k: with "
                "the queries all zero it still changes with the keys, and with the keys all zero "
                "it still changes with the queries")
    return None


def require_attention(gate: str | None) -> None:
    """Fail a property test when the module does not do attention's job."""
    if gate:
        pytest.fail(f"no points for this property: your module does not do attention's job "
                    f"({gate}). Properties such as causality or the parameter count only count "
                    f"for a module whose outputs mix its own and earlier positions.")


@pytest.fixture
def gated(attention_gate) -> None:
    require_attention(attention_gate)


@pytest.fixture(scope="session", autouse=True)
def diagnosis(student, findings):
    """Which known mistakes explain this submission (see diagnosis.py), reported once per grade:
    the layers and the forbidden built-ins before the tests, the probes of what went wrong after
    them, and only if a test failed. The meta-device advice comes from test_07_advice.py. At the
    end of the grade, a call to a forbidden built-in that the workers counted after the first
    check is reported too."""
    from exercise.causal_self_attention.diagnosis import complete, diagnose, forbidden_at_run_time
    _FAILED.clear()  # a warm sandbox's harness is a fork: start from nothing
    with student.side_allowance(timeouts=1):  # a hanging forward must not use up the tests' allowance
        found = diagnose(student, student.source_lines, student.locate)
    yield found
    with student.side_allowance(timeouts=1):
        complete(found, student, student.source_lines, student.locate, failed=bool(_FAILED))
    evidence = None if "uses_forbidden_builtin" in found.ids() else forbidden_at_run_time(student)
    if evidence:
        found.add("uses_forbidden_builtin", "at_run_time", evidence)
    reported = {bug["id"] for bug in findings.bugs}
    for finding in found.findings:
        if finding.id not in reported:
            findings.add(finding.to_report())
    findings.note = found.unexplained
    findings.skipped = found.skipped


_FAILED: list[str] = []


def pytest_runtest_logreport(report):
    """Which tests failed, for the diagnosis after them."""
    if report.failed:
        _FAILED.append(report.nodeid)


def _fail_if_delegated(student, diagnosis) -> None:
    from exercise.causal_self_attention.diagnosis import forbidden_at_run_time
    evidence = next((f.evidence for f in diagnosis.findings if f.id == "uses_forbidden_builtin"), None)
    evidence = evidence or forbidden_at_run_time(student)
    if evidence:
        pytest.fail("no points: your layer delegates to nn.MultiheadAttention / "
                    f"F.multi_head_attention_forward ({evidence}); the exercise is to write attention yourself")


@pytest.fixture
def written_by_hand(student, diagnosis) -> None:
    """The comparison tests give no points to a layer that delegates to nn.MultiheadAttention:
    checked before the test, and again after it (pytest_runtest_call below), since the count
    covers every call of every test."""
    _fail_if_delegated(student, diagnosis)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A comparison test fails if a forbidden built-in was counted by the time its own calls end,
    so a module that behaves until some probe has run is caught wherever it starts."""
    result = yield
    if "written_by_hand" in item.fixturenames:
        _fail_if_delegated(item.funcargs["student"], item.funcargs["diagnosis"])
    return result
