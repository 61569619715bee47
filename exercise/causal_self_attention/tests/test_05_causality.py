"""No output depends on a later input: checked with autograd, and with the forward alone."""
import pytest
import torch

from exercise.causal_self_attention import reference
from exercise.causal_self_attention.checks import LONG_T, finite_difference_jvps, gradient_agrees
from sandbox.kit import differs
from sandbox.failures import StudentCodeError
from exercise.causal_self_attention.groups import graded

# (dim, n_heads, B, T, real lengths or None): one head with and without padding, one sequence, the
# first sequence padded, T past 8 (where a cached mask may end), head_dim 1.
JACOBIAN_CASES = [(24, 4, 2, 6, None), (24, 4, 2, 6, [3, 6]), (12, 3, 3, 9, [9, 1, 5]), (8, 1, 3, 7, [2, 7, 4]),
                  (8, 8, 1, 12, None), (32, 8, 2, 6, [6, 6])]


def _case_id(case):
    dim, h, B, T, lengths = case
    return f"dim{dim}-h{h}-B{B}-T{T}-" + _masking(lengths).replace(" ", "_")


def _masking(lengths) -> str:
    if lengths is None:
        return "no mask"
    return "all-True mask" if lengths == "all" else "padding " + "_".join(map(str, lengths))


@graded
@pytest.mark.parametrize("case", JACOBIAN_CASES, ids=[_case_id(c) for c in JACOBIAN_CASES])
def test_autograd_sees_no_future(student, draws, gated, case):
    dim, n_heads, B, T, lengths = case
    module = student.new(dim, n_heads)
    x = draws.normal(B, T, dim, label=("jacobian", case))
    mask = None if lengths is None else reference.right_padding(lengths, T)
    g = draws.generator("jacobian", case, "cotangents")
    cotangents = torch.zeros(T, B, T, dim, dtype=torch.float64)
    for t in range(T):
        cotangents[t, :, t] = torch.randn(B, dim, generator=g, dtype=torch.float64)
    try:
        grads = module.vjp(x, mask, cotangents=cotangents)              # (T_out, B, T_in, dim)
    except StudentCodeError as err:
        pytest.fail("a backward pass through your module failed, so autograd cannot check causality. "
                    "Keep forward differentiable: no torch.no_grad(), no .detach(), no in-place change "
                    f"of a tensor autograd still needs.\n{err.describe()}")
    if tuple(grads.shape) != (T, B, T, dim):
        pytest.fail(f"the gradient with respect to x has shape {tuple(grads.shape[1:])}, expected {(B, T, dim)}")
    dep = grads.abs().amax(dim=3).nan_to_num(nan=float("inf"))          # (T_out, B, T_in)
    scale = float(dep[torch.isfinite(dep)].max()) if torch.isfinite(dep).any() else 1.0
    where = f"dim={dim}, n_heads={n_heads}, B={B}, T={T}, " + (
        "no mask" if mask is None else f"padding mask with real lengths {lengths}")
    for t in range(T):
        for s in range(t + 1, T):
            worst = dep[t, :, s].max()
            if worst > 1e-9 * scale:
                b = int(dep[t, :, s].argmax())
                pytest.fail(f"the output at position {t} depends on the later input at position {s} "
                            f"(|d out[{b}, {t}] / d x[{b}, {s}]| = {float(worst):.3g}); {where}")
    real = torch.ones(B, T, dtype=torch.bool) if mask is None else mask
    for b, t in real.nonzero().tolist():
        if dep[t, b, t] <= 1e-6 * scale:
            pytest.fail(f"autograd says the output at position {t} does not depend on the input at "
                        f"position {t}: the autograd graph is cut (torch.no_grad(), .detach(), .data?); {where}")
    # The gradient comes from the student's process: check it, the zeros claimed for the future
    # included, against finite differences of the forward outputs along random directions that move
    # every input position at once. For each output position t, <cotangent_t, J u> must equal the
    # sum over s of the gradient blocks d out[t] / d x[s] applied to u[s]: a block that hides a
    # dependence (a custom backward, .detach()) breaks that sum.
    directions = [torch.randn(B, T, dim, generator=g, dtype=torch.float64) for _ in range(2)]
    for direction, steps in zip(directions, finite_difference_jvps(module, x, mask, directions)):
        for t in range(T):
            autograd = (grads[t] * direction).sum(dim=(1, 2))               # (B,)
            numeric = [((cotangents[t, :, t] * est[:, t]).sum(dim=1),
                        (cotangents[t, :, t].abs() * unc[:, t]).sum(dim=1)) for est, unc in steps]
            if not gradient_agrees(autograd, numeric, atol=1e-6 * max(scale, 1.0)).all():
                at = min(numeric, key=lambda n: float(n[1].max()))[0].tolist()
                pytest.fail(f"autograd disagrees with your forward: nudging the inputs moves the output at "
                            f"position {t} at the rate {_fmt(at)} (finite differences), but the gradient says "
                            f"{_fmt(autograd.tolist())}. Part of the computation is hidden from autograd "
                            f"(.detach(), torch.no_grad(), .data, a custom backward); {where}")


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"


PERTURB_CASES = [(24, 4, 2, 6, None), (12, 3, 3, 7, "all"), (8, 1, 1, 12, None), (32, 8, 3, 40, [40, 17, 3]),
                 (8, 2, 3, LONG_T, [LONG_T, 1, 130])]
PERTURB_POSITIONS = 16   # replacement points s drawn for the long case (every s up to T = 40)


@graded
@pytest.mark.parametrize("case", PERTURB_CASES, ids=[_case_id(c) for c in PERTURB_CASES])
def test_changing_later_inputs_changes_no_earlier_output(student, draws, gated, case):
    dim, n_heads, B, T, lengths = case
    module = student.new(dim, n_heads)
    x = draws.normal(B, T, dim, label=("perturb", case))
    mask = (torch.ones(B, T, dtype=torch.bool) if lengths == "all"
            else None if lengths is None else reference.right_padding(lengths, T))
    noise = draws.normal(B, T, dim, label=("perturb", case, "noise")) * 5
    starts = list(range(1, T)) if T <= 40 else sorted(
        {1, T - 1, *draws.shuffled(range(2, T - 1), "perturb", case, "s")[:PERTURB_POSITIONS]})
    moved = [torch.cat([x[:, :s], noise[:, s:]], dim=1) for s in starts]
    base, *outs = module.map([(x, mask)] + [(m, mask) for m in moved])
    for s, out in zip(starts, outs):
        if tuple(out.shape) != (B, T, dim) or tuple(base.shape) != (B, T, dim):
            pytest.fail(f"output shape {tuple(out.shape)}, expected {(B, T, dim)}")
        # A NaN that stays NaN at a padded query (one a padding bug left with no key) is unchanged:
        # the padding tests grade it. Anywhere else a NaN is a change.
        padded = torch.zeros(B, T, dtype=torch.bool) if mask is None else ~mask
        changed = differs(out[:, :s], base[:, :s], atol=1e-9, rtol=1e-7,
                          nan_may_stay=padded[:, :s, None]).any(dim=2)
        if changed.any():
            b, t = (int(i) for i in changed.nonzero()[0])
            pytest.fail(f"replacing the inputs at positions {s}..{T - 1} changed the output at earlier "
                        f"position {t} (by up to {(out - base)[b, t].abs().max().item():.3g}): position "
                        f"{t} sees the future; dim={dim}, n_heads={n_heads}, B={B}, T={T}, {_masking(lengths)}")
