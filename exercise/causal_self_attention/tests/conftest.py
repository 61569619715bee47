"""Fixtures shared by the causal self-attention tests. `student` comes from the harness.

Property tests (causality, padding properties, parameter count) run the student's module with its
own initial weights: a property does not depend on the weight values, and a module whose layers
are laid out wrongly still shows whether it is causal.
"""
from __future__ import annotations

import pytest
import torch

from exercise.causal_self_attention.checks import random_input
from sandbox.proxy import StudentCodeError, WorkerFailure


@pytest.fixture(scope="session")
def attention_gate(student) -> str | None:
    """None when the module does attention's job (each output depends on its own input and on
    every earlier one), else why not. Property points are worth nothing without it: `return x`
    is causal, and a module that ignores its input has the right parameter count."""
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


def require_attention(gate: str | None) -> None:
    """Fail a property test when the module does not do attention's job."""
    if gate:
        pytest.fail(f"no points for this property: your module does not do attention's job "
                    f"({gate}). Properties such as causality or the parameter count only count "
                    f"for a module whose outputs mix its own and earlier positions.")


@pytest.fixture
def gated(attention_gate) -> None:
    require_attention(attention_gate)


def finite_difference_jvps(module, x: torch.Tensor, mask, directions: list, eps: float = 1e-6) -> list:
    """(f(x + eps*u) - f(x - eps*u)) / 2 eps for each direction u, from forward outputs alone:
    the harness's own check of gradients that come from the student's process."""
    outs = module.map([(x + sign * eps * u, mask) for u in directions for sign in (1, -1)])
    return [(plus - minus) / (2 * eps) for plus, minus in zip(outs[::2], outs[1::2])]


@pytest.fixture(scope="session", autouse=True)
def diagnosis(student, findings):
    """Which known mistakes explain this submission (see diagnosis.py), reported once per grade.
    The meta-device advice comes last, from test_07_advice.py."""
    from exercise.causal_self_attention.diagnosis import diagnose
    with student.side_allowance(timeouts=1):  # a hanging forward must not use up the tests' allowance
        found = diagnose(student, student.source_lines, student.locate)
    for finding in found.findings:
        findings.add(finding.to_report())
    findings.note = found.unexplained
    findings.skipped = found.skipped
    return found


@pytest.fixture
def written_by_hand(diagnosis) -> None:
    """The comparison tests give no points to a layer that delegates to nn.MultiheadAttention."""
    if "uses_forbidden_builtin" in diagnosis.ids():
        evidence = next(f.evidence for f in diagnosis.findings if f.id == "uses_forbidden_builtin")
        pytest.fail("no points: your layer delegates to nn.MultiheadAttention / "
                    f"F.multi_head_attention_forward ({evidence}); the exercise is to write attention yourself")
    if diagnosis.unchecked:  # a source the check cannot read earns no benefit of the doubt
        pytest.fail(f"no points: the grader could not check that your layer does not delegate to "
                    f"nn.MultiheadAttention ({diagnosis.unchecked}); simplify the file (fewer or "
                    f"differently named definitions) and submit again")
