"""Fixtures shared by the causal self-attention tests. `student` comes from the harness.

Property tests (causality, padding properties, parameter count) run the student's module with its
own initial weights: a property does not depend on the weight values, and a module whose layers
are laid out wrongly still shows whether it is causal.
"""
from __future__ import annotations

import itertools

import pytest
import torch

from exercise.causal_self_attention import readout
from exercise.causal_self_attention.reference import random_weights
from sandbox.failures import StudentCodeError, WorkerFailure


@pytest.fixture(scope="session")
def attention_gate(student, draws) -> str | None:
    """None when the module does attention's job, else why not. Property points are worth nothing
    without it: `return x` is causal, a module that ignores its input has the right parameter
    count, and a running mean of v is causal and mixes the past without attending at all. So:
    - each output depends on its own input and on every earlier one;
    - the output is not an affine function of the input (softmax weights are not);
    - with the grader's weights in the stated layout, the output depends on the queries and on
      the keys (the q and the k rows of qkv), and as scores q.k do: with one of the two zero,
      the other no longer matters. Any order of q, k, v inside the layer (blocks in any order, or
      interleaved per head) passes; a layer whose output ignores q or k does not."""
    problem = _mixes_past(student, draws)
    if problem is None:
        problem = _not_affine(student, draws)
    if problem is None:
        problem = _scores_from_queries_and_keys(student, draws)
    return problem


def _gate_shape(draws, label) -> tuple[int, int, int]:
    """(dim, B, T) of a gate's probe, drawn from the family the scored cases come from."""
    return readout.DIM, draws.choice(readout.BATCHES, label, "B"), draws.choice(readout.LENGTHS, label, "T")


def _mixes_past(student, draws) -> str | None:
    dim, B, T = _gate_shape(draws, "mixes")
    try:
        module = student.new(dim, readout.HEADS)
        x = draws.normal(B, T, dim, label=("mixes", "x"))
        noise = draws.normal(B, T, dim, label=("mixes", "noise"))
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
FOLLOWS = 1e-2      # new queries or keys move real attention's output by ~0.1 to 1 of its size


def _not_affine(student, draws) -> str | None:
    dim, B, T = _gate_shape(draws, "affine")
    try:
        module = student.new(dim, readout.HEADS)
        x, y = draws.normal(B, T, dim, label=("affine", "x")), draws.normal(B, T, dim, label=("affine", "y"))
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


def _scores_shapes(draws) -> list[tuple[int, int, int]]:
    """The two (dim, B, T) the scores check probes: the first drawn from the family, the second
    with another batch size and another length, so that a layer which attends only at some shapes
    (one it takes for the grader's, or one batch size, or one length) and mixes with fixed
    weights elsewhere never passes the gate, whichever shape a test's scored cases share with it."""
    dim, B, T = _gate_shape(draws, "scores")
    other_B = draws.choice(tuple(b for b in readout.BATCHES if b != B), "scores", "second", "B")
    other_T = draws.choice(tuple(t for t in readout.LENGTHS if t != T), "scores", "second", "T")
    return [(dim, B, T), (dim, other_B, other_T)]


def _scores_from_queries_and_keys(student, draws) -> str | None:
    heads = readout.HEADS
    try:
        for i, (dim, B, T) in enumerate(_scores_shapes(draws)):
            module = student.new(dim, heads)
            if module.params.get("qkv.weight") != (3 * dim, dim):
                return None  # not the stated layout: the interface tests say so; the checks above stand
            label = ("scores",) if i == 0 else ("scores", i)
            base = {k: v for k, v in random_weights(dim, seed=draws.integer(0, 2 ** 62, *label, "base")).items()
                    if module.params.get(k) == tuple(v.shape)}
            other = random_weights(dim, seed=draws.integer(0, 2 ** 62, *label, "other"))
            x = draws.normal(B, T, dim, label=(*label, "x"))
            problem = _scores_at_one_shape(module, base, other, x, dim, heads)
            if problem is not None:
                return problem
        return None
    except (StudentCodeError, WorkerFailure) as err:
        return f"its forward could not be run with the grader's weights: {err}"


def _scores_at_one_shape(module, base: dict, other: dict, x: torch.Tensor, dim: int, heads: int) -> str | None:
    """None when some layout of q and k in qkv makes the output follow both as scores q.k do."""
    first = None
    for q_rows, k_rows in _row_layouts(dim, heads):
        problem = _scores_problem(module, base, other, x, q_rows, k_rows)
        if problem is None:
            return None
        first = first or problem
    return first


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
        outs.append(module.call_with(weights, x).double())
    if any(tuple(o.shape) != (B, T, dim) for o in outs):
        return f"its output has shape {tuple(outs[0].shape)} for an input of shape {(B, T, dim)}"
    base_out, new_q, new_k, q0, q0_new_k, k0, k0_new_q = outs

    def moved(a, b) -> bool:
        return (a - b).abs().nan_to_num(nan=1.0).max().item() > GATE_CHANGE
    # As attention's weights do: new queries or keys of the same size move the output by a good
    # part of its own size, not by a trace (weights that fall off with distance plus 1e-3 * q . k).
    size = base_out.abs().nan_to_num(nan=0.0).max().item()

    def follows(a) -> bool:
        return moved(a, base_out) and (a - base_out).abs().nan_to_num(nan=float("inf")).max().item() > FOLLOWS * size
    if not follows(new_q):
        return "its output does not follow the queries (the q rows of qkv): new queries barely change it"
    if not follows(new_k):
        return "its output does not follow the keys (the k rows of qkv): new keys barely change it"
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
def loosely_gated(attention_gate) -> None:
    """The gate above alone: each output mixes its own and earlier positions, not affinely, and
    follows q and k (the parameter count's gate: a layer whose heads are split wrongly still has
    the right parameters)."""
    require_attention(attention_gate)


_LAYOUT: list[int] = []   # which qkv layout the layer's read-out worked with: tried first next time


@pytest.fixture
def gated(request, student, draws, attention_gate) -> None:
    """The gate above, and the read-out (readout.py) at a shape, input and weights drawn anew
    for each test: every head's matrix, read out of the output with the grader's weights, is a
    softmax of q . k over the causal keys. Drawn per test from the same family as the scored
    cases, so no test's read-out can be told from its scored calls by shape, seed or place."""
    require_attention(attention_gate)
    try:
        problem = readout.attends(student, draws, ("read-out", request.node.nodeid), first=_LAYOUT)
    except (StudentCodeError, WorkerFailure) as err:
        problem = f"its forward could not be run with the grader's weights: {err}"
    require_attention(problem)


@pytest.fixture(scope="session", autouse=True)
def diagnosis(student, findings, phases):
    """Which known mistakes explain this submission (see diagnosis.py), reported once per grade:
    the layers and the forbidden built-ins before the tests, the probes of what went wrong after
    them, and only if a test failed. The meta-device advice comes from test_07_advice.py. At the
    end of the grade, a call to a forbidden built-in that the workers counted after the first
    check is reported too."""
    from exercise.causal_self_attention.diagnosis import complete, diagnose, forbidden_at_run_time
    _FAILED.clear()  # a warm sandbox's harness is a fork: start from nothing
    _LAYOUT.clear()
    with student.side_allowance(timeouts=1), phases.span("diagnosis: before the tests"):
        found = diagnose(student, student.source_lines, student.locate)  # a hanging forward must not use up the tests' allowance
    yield found
    with student.side_allowance(timeouts=1), phases.span("diagnosis: after the tests"):
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
