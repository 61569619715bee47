"""No output depends on a later query, key or value: checked with the forward alone, and the
gradients the student's process reports cross-checked against finite differences of its forward
outputs, computed here in float64."""
import pytest
import torch

from exercise.causal_attention_head.checks import answers_and_gate, drawn_qkv, require_attention
from sandbox.kit import contracted_jvps, differs, finite_difference_jvps, gradient_agrees
from sandbox.failures import StudentCodeError
from exercise.causal_attention_head.groups import graded

# (B, T, d_k): T = 1 (only the own position), short and long, one sequence and three, d_k = 1.
CASES = [(2, 1, 3), (2, 6, 4), (1, 9, 1), (3, 17, 6)]


@graded
@pytest.mark.parametrize("case", CASES, ids=[f"B{B}-T{T}-d{d}" for B, T, d in CASES])
def test_autograd_sees_no_future(student, draws, case):
    B, T, d_k = case
    label = ("causality", case)
    (q, k, v), = drawn_qkv(draws, label, "float64", cases=[case])
    _, problem = answers_and_gate(student, draws, [(q, k, v)], "float64", label)
    require_attention(problem)
    fn = student.function()
    where = f"B={B}, T={T}, d_k={d_k}"
    # The forward alone: replace q, k and v from position s on; no output before s may change (a
    # NaN where there was a number, or NaN on both sides, is a change: ordinary inputs give none).
    noise = drawn_qkv(draws, (*label, "noise"), "float64", cases=[case])[0]
    moved = [tuple(torch.cat([x[:, :s], 5 * n[:, s:]], dim=1) for x, n in zip((q, k, v), noise)) for s in range(1, T)]
    base, *outs = (o for o, _ in fn.map([(q, k, v), *moved]))
    for s, out in enumerate(outs, start=1):
        changed = differs(out[:, :s], base[:, :s], atol=1e-9, rtol=1e-7)
        if changed.any():
            b, t = (int(i) for i in changed.any(dim=2).nonzero()[0])
            pytest.fail(f"replacing q, k and v at positions {s}..{T - 1} changes your output at the earlier "
                        f"position {t}: position {t} sees the future; {where}")
    g = draws.generator(*label, "cotangents")
    cotangents = torch.zeros(T, B, T, d_k, dtype=torch.float64)   # one per output position t
    for t in range(T):
        cotangents[t, :, t] = torch.randn(B, d_k, generator=g, dtype=torch.float64)
    for wrt, name in enumerate("qkv"):
        try:
            grads = fn.vjp(q, k, v, cotangents=list(cotangents), wrt=wrt, output=0)    # (T_out, B, T_in, d_k)
        except StudentCodeError as err:
            pytest.fail("a backward pass through your function failed, so autograd cannot check causality. Keep "
                        "it differentiable: no torch.no_grad(), no .detach(), no in-place change of a tensor "
                        f"autograd still needs.\n{err.describe()}")
        if tuple(grads.shape) != (T, B, T, d_k):
            pytest.fail(f"the gradient with respect to {name} has shape {tuple(grads.shape[1:])}, expected {(B, T, d_k)}")
        grads = grads.double()
        # The gradient comes from the student's process (a patched autograd, a tensor subclass, a
        # forward run without a graph plus a term that fakes one): check it against finite
        # differences of the forward along a direction that moves every position at once.
        direction = torch.randn(B, T, d_k, generator=g, dtype=torch.float64)
        numeric = finite_difference_jvps(lambda calls: [o for o, _ in fn.map(calls)], (q, k, v), wrt, [direction])[0]
        autograd, contracted = contracted_jvps(grads, cotangents, direction, numeric)
        scale = max(float(grads.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).max()), 1.0)
        agree = gradient_agrees(autograd, contracted, atol=1e-6 * scale)
        if not agree.all():
            t = int((~agree).any(dim=1).nonzero()[0])
            at = min(contracted, key=lambda n: float(n[1].max()))[0][t].tolist()
            pytest.fail(f"autograd disagrees with your forward: nudging {name} moves the output at position {t} at "
                        f"the rate {_fmt(at)} (finite differences), but the gradient says {_fmt(autograd[t].tolist())}. "
                        f"Part of the computation is hidden from autograd (.detach(), torch.no_grad(), .data, "
                        f"a custom backward); {where}")
        dep = grads.abs().amax(dim=3).nan_to_num(nan=float("inf"))                    # (T_out, B, T_in)
        for t in range(T):
            later = dep[t, :, t + 1:]
            if (later > 1e-9 * scale).any():
                b, s = (int(i) for i in (later == later.max()).nonzero()[0])
                pytest.fail(f"the output at position {t} depends on the later {name} at position {t + 1 + s} "
                            f"(|d out[{b}, {t}] / d {name}[{b}, {t + 1 + s}]| = {float(later.max()):.3g}); {where}")
        # Every output depends on its own value: only exact zeros count (a steep softmax may make a
        # true dependence tiny), and the gradient agreed with the forward above.
        if name == "v" and (dep[torch.arange(T), :, torch.arange(T)] == 0).any():
            t = int((dep[torch.arange(T), :, torch.arange(T)] == 0).any(dim=1).nonzero()[0])
            pytest.fail(f"autograd says the output at position {t} does not depend on v at position {t}: the "
                        f"autograd graph is cut (torch.no_grad(), .detach(), .data?); {where}")


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"
