"""Fixtures shared by the causal self-attention tests. `student` comes from the harness."""
from __future__ import annotations

import pytest
import torch

from exercise.causal_self_attention.checks import new_module, random_input
from sandbox.proxy import StudentCodeError, WorkerFailure


@pytest.fixture(scope="session")
def attention_gate(student) -> str | None:
    """None when the module does attention's job (each output depends on its own input and on
    every earlier one), else why not. Property points are worth nothing without it: `return x`
    is causal, and a module that ignores its input has the right parameter count."""
    dim, B, T = 24, 2, 6
    try:
        module, _ = new_module(student, dim, 4)
        x = random_input(B, T, dim, seed=7)
        base = module(x)
        if tuple(base.shape) != (B, T, dim):
            return f"its output has shape {tuple(base.shape)} for an input of shape {(B, T, dim)}"
        noise = random_input(B, T, dim, seed=8)
        for s in range(T):
            moved = x.clone()
            moved[:, s] += noise[:, s]
            change = (module(moved) - base).abs().nan_to_num(nan=1.0).amax(dim=(0, 2))    # (T,)
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


def finite_difference_jvp(module, x: torch.Tensor, mask, direction: torch.Tensor, eps: float = 1e-6):
    """(f(x + eps*u) - f(x - eps*u)) / 2 eps, from forward outputs alone (the harness's own check)."""
    return (module(x + eps * direction, mask) - module(x - eps * direction, mask)) / (2 * eps)
