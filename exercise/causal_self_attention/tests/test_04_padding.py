"""key_padding_mask: padding keys get no weight, at every position, padded queries included."""
import pytest
import torch

from exercise.causal_self_attention import reference
from exercise.causal_self_attention.checks import compare, describe_case, new_module, random_input

CASES = [(8, 2, "float32"), (24, 4, "float64"), (12, 3, "float32"), (32, 8, "float64")]


@pytest.mark.points(12)
@pytest.mark.parametrize("dim,n_heads,dtype", CASES, ids=[f"dim{d}-h{h}-{t}" for d, h, t in CASES])
def test_padding_matches_multihead_attention(student, written_by_hand, dim, n_heads, dtype):
    """With right padding, every position matches nn.MultiheadAttention"""
    module, weights = new_module(student, dim, n_heads, dtype=dtype, seed=3 * dim)
    cases = [(random_input(len(lengths), T, dim, seed=T + sum(lengths), dtype=dtype),
              reference.right_padding(lengths, T))
             for T, lengths in ((7, [7, 4, 1]), (7, [5]), (40, [40, 23, 2]), (6, [3, 6]))]
    for (x, mask), out in zip(cases, module.map(cases)):
        problem = compare(out, reference.attention(weights, n_heads, x, mask), dtype=dtype, mask=mask)
        if problem:
            pytest.fail(f"case: {describe_case(dim, n_heads, x, mask, dtype)}\n{problem}")


@pytest.mark.points(4)
def test_all_true_mask_equals_no_mask(student, gated):
    """A mask with no padding gives the same output as no mask"""
    module = student.new(24, 4)
    x = random_input(3, 6, 24, seed=41)
    everything = torch.ones(3, 6, dtype=torch.bool)
    with_mask, without = module.map([(x, everything), (x,)])
    problem = compare(with_mask, without, dtype="float64")
    if problem:
        pytest.fail("forward(x, mask) with every token real must equal forward(x): a mask without "
                    f"padding changes nothing\n(your forward(x) is the expected side)\n{problem}")


@pytest.mark.points(4)
def test_padded_inputs_do_not_reach_real_positions(student, gated):
    """Changing the inputs at padded positions changes no real position's output"""
    module = student.new(24, 4)
    lengths, T = [6, 3, 1], 6
    x = random_input(3, T, 24, seed=51)
    mask = reference.right_padding(lengths, T)
    noisy = torch.where(mask[:, :, None], x, random_input(3, T, 24, seed=52) * 10)
    before, after = module.map([(x, mask), (noisy, mask)])
    changed = ~torch.isclose(after, before, atol=1e-9, rtol=1e-7).all(dim=2) & mask     # (B, T) real
    if changed.any():
        b, t = (int(i) for i in changed.nonzero()[0])
        pytest.fail(f"with real lengths {lengths}, replacing the padded inputs changed the output "
                    f"of real position {t} in sequence {b} (max change "
                    f"{(after - before)[b, t].abs().max().item():.3g}): padding keys must get no weight")
