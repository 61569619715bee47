"""key_padding_mask: padding keys get no weight, at every position, padded queries included."""
import pytest
import torch

from exercise.causal_self_attention import reference
from exercise.causal_self_attention.checks import (LONG_T, SHAPE_IDS, SHAPES, compare, describe_case, new_module,
                                                   padding_patterns)
from sandbox.kit import differs
from exercise.causal_self_attention.groups import graded

# Property cases: one head and one sequence, 3 and 4 heads, 8 heads past any fixed buffer (four
# cases, so that each case's share of the points is a round number).
PROPERTY_CASES = [(24, 4, 3, 6), (8, 1, 1, 9), (12, 3, 3, 17), (32, 8, 3, LONG_T)]
PROPERTY_IDS = [f"dim{d}-h{h}-B{B}-T{T}" for d, h, B, T in PROPERTY_CASES]


@graded
@pytest.mark.parametrize("dim,n_heads", SHAPES, ids=SHAPE_IDS)
def test_padding_matches_multihead_attention(student, draws, written_by_hand, dim, n_heads):
    for dtype in ("float32", "float64"):
        label = ("padding", dim, n_heads, dtype)
        module, weights = new_module(student, dim, n_heads, dtype=dtype, seed=draws.integer(0, 2 ** 40, *label))
        cases = [(draws.normal(len(lengths or [0, 0, 0]), T, dim, label=(*label, i), dtype=dtype),
                  None if lengths is None else reference.right_padding(lengths, T))
                 for i, (T, lengths) in enumerate(draws.shuffled(padding_patterns(), *label))]
        calls = [(x,) if mask is None else (x, mask) for x, mask in cases]
        for (x, mask), out in zip(cases, module.map(calls)):
            problem = compare(out, reference.attention(weights, n_heads, x, mask), dtype=dtype, mask=mask)
            if problem:
                pytest.fail(f"case: {describe_case(dim, n_heads, x, mask, dtype)}\n{problem}")


def _lengths(B: int, T: int) -> list[int]:
    """Real lengths with the first sequence padded (B = 1: half the sequence)."""
    return [max(T // 2, 1)] if B == 1 else ([3, T, 1] + [T] * (B - 3))[:B]


@graded
@pytest.mark.parametrize("dim,n_heads,B,T", PROPERTY_CASES, ids=PROPERTY_IDS)
def test_all_true_mask_equals_no_mask(student, draws, gated, dim, n_heads, B, T):
    module = student.new(dim, n_heads)
    x = draws.normal(B, T, dim, label=("all-true", dim, n_heads, B, T))
    everything = torch.ones(B, T, dtype=torch.bool)
    with_mask, without = module.map([(x, everything), (x,)])
    problem = compare(with_mask, without, dtype="float64")
    if problem:
        pytest.fail(f"dim={dim}, n_heads={n_heads}, B={B}, T={T}: forward(x, mask) with every token real "
                    "must equal forward(x): a mask without padding changes nothing\n"
                    f"(your forward(x) is the expected side)\n{problem}")


@graded
@pytest.mark.parametrize("dim,n_heads,B,T", PROPERTY_CASES, ids=PROPERTY_IDS)
def test_padded_inputs_do_not_reach_real_positions(student, draws, gated, dim, n_heads, B, T):
    module = student.new(dim, n_heads)
    lengths = _lengths(B, T)
    x = draws.normal(B, T, dim, label=("padded-inputs", dim, n_heads, B, T))
    mask = reference.right_padding(lengths, T)
    noisy = torch.where(mask[:, :, None], x, draws.normal(B, T, dim, label=("padded-inputs", dim, n_heads, B, T, "noise")) * 10)
    before, after = module.map([(x, mask), (noisy, mask)])
    if tuple(before.shape) != (B, T, dim) or tuple(after.shape) != (B, T, dim):
        pytest.fail(f"output shape {tuple(before.shape)}, expected {(B, T, dim)}")
    changed = differs(after, before, atol=1e-9, rtol=1e-7).any(dim=2) & mask  # (B, T); NaN never equals
    if changed.any():
        b, t = (int(i) for i in changed.nonzero()[0])
        pytest.fail(f"dim={dim}, n_heads={n_heads}: with real lengths {lengths}, replacing the padded "
                    f"inputs changed the output of real position {t} in sequence {b} (max change "
                    f"{(after - before)[b, t].abs().max().item():.3g}): padding keys must get no weight")
