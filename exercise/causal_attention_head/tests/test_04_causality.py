"""No output depends on a later query, key or value: checked by autograd, and cross-checked with
the forward alone (the gradients come from the student's process)."""
import pytest
import torch

from exercise.causal_attention_head.reference import random_qkv
from sandbox.proxy import StudentCodeError

# (B, T, d_k): T = 1 (only the own position), short and long, one sequence and three, d_k = 1.
CASES = [(2, 1, 3), (2, 6, 4), (1, 9, 1), (3, 17, 6)]


@pytest.mark.points(15)
@pytest.mark.parametrize("case", CASES, ids=[f"B{B}-T{T}-d{d}" for B, T, d in CASES])
def test_autograd_sees_no_future(student, gated, case):
    """Autograd: d out[t] / d q[s], k[s], v[s] is zero for every later s, and not for s = t"""
    B, T, d_k = case
    fn = student.function()
    q, k, v = random_qkv(B, T, d_k, seed=70)
    g = torch.Generator().manual_seed(71)
    cotangents = torch.zeros(T, B, T, d_k, dtype=torch.float64)   # one per output position t
    for t in range(T):
        cotangents[t, :, t] = torch.randn(B, d_k, generator=g, dtype=torch.float64)
    where = f"B={B}, T={T}, d_k={d_k}"
    for wrt, name in enumerate("qkv"):
        try:
            grads = fn.vjp(q, k, v, cotangents=list(cotangents), wrt=wrt, output=0)    # (T_out, B, T_in, d_k)
        except StudentCodeError as err:
            pytest.fail("a backward pass through your function failed, so autograd cannot check causality. Keep "
                        "it differentiable: no torch.no_grad(), no .detach(), no in-place change of a tensor "
                        f"autograd still needs.\n{err.describe()}")
        if tuple(grads.shape) != (T, B, T, d_k):
            pytest.fail(f"the gradient with respect to {name} has shape {tuple(grads.shape[1:])}, expected {(B, T, d_k)}")
        dep = grads.double().abs().amax(dim=3).nan_to_num(nan=float("inf"))           # (T_out, B, T_in)
        scale = float(dep[torch.isfinite(dep)].max()) if torch.isfinite(dep).any() else 1.0
        for t in range(T):
            later = dep[t, :, t + 1:]
            if (later > 1e-9 * scale).any():
                b, s = (int(i) for i in (later == later.max()).nonzero()[0])
                pytest.fail(f"the output at position {t} depends on the later {name} at position {t + 1 + s} "
                            f"(|d out[{b}, {t}] / d {name}[{b}, {t + 1 + s}]| = {float(later.max()):.3g}); {where}")
        # Every output depends on its own value, and (with two keys or more to weigh) the outputs on
        # the queries and keys. Only exact zeros count: a steep softmax may make a true dependence tiny.
        if name == "v" and (dep[torch.arange(T), :, torch.arange(T)] == 0).any():
            t = int((dep[torch.arange(T), :, torch.arange(T)] == 0).any(dim=1).nonzero()[0])
            pytest.fail(f"autograd says the output at position {t} does not depend on v at position {t}: the "
                        f"autograd graph is cut (torch.no_grad(), .detach(), .data?); {where}")
        if name != "v" and T > 1 and not (dep > 0).any():
            pytest.fail(f"autograd says no output depends on {name}: the autograd graph is cut "
                        f"(torch.no_grad(), .detach(), .data?); {where}")
    # The zeros above come from the student's process: the forward must agree. Replace q, k and v
    # from position s on; no output before s may change.
    noise = random_qkv(B, T, d_k, seed=72)
    moved = [tuple(torch.cat([x[:, :s], 5 * n[:, s:]], dim=1) for x, n in zip((q, k, v), noise)) for s in range(1, T)]
    base, *outs = (o for o, _ in fn.map([(q, k, v), *moved]))
    for s, out in enumerate(outs, start=1):
        changed = ~torch.isclose(out[:, :s].double(), base[:, :s].double(), atol=1e-9, rtol=1e-7, equal_nan=True)
        if changed.any():
            b, t = (int(i) for i in changed.any(dim=2).nonzero()[0])
            pytest.fail(f"autograd says no output depends on a later input, but replacing q, k and v at positions "
                        f"{s}..{T - 1} changes your output at the earlier position {t}: part of the computation "
                        f"is hidden from autograd (.detach(), .data, a custom backward); {where}")
