"""The statement's worked example: equal scores average the past.

The scores are made equal without any input a module could recognise: q = 0 would be one test a
module could special-case. Here, in each head, the queries live in one half of a random rotation
of the head's space and the keys vary only in the other half, so q_t . k_s is the same for every
key s, while q, k and v are all non-zero and new at every grade (as are B and T). Only a module
that computes the scores sees that they are equal.
"""
import secrets

import pytest
import torch

from exercise.causal_self_attention.checks import DTYPES, compare, describe_case, random_input


def equal_score_weights(dim: int, n_heads: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """qkv and proj weights under which, in every head, q_t . k_s does not depend on s."""
    hd = dim // n_heads
    bound = dim ** -0.5

    def uniform(*shape):
        return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * bound
    w_q, b_q, w_k, b_k = [], [], [], []
    for _ in range(n_heads):
        rotation, _ = torch.linalg.qr(torch.randn(hd, hd, generator=g, dtype=torch.float64))
        split = int(torch.randint(1, hd, (1,), generator=g)) if hd > 1 else 1
        queries, keys = rotation[:, :split], rotation[:, split:]            # orthogonal halves
        w_q.append(queries @ uniform(split, dim))
        b_q.append(queries @ uniform(split))
        w_k.append(keys @ uniform(hd - split, dim))                          # varies only across
        b_k.append(queries @ uniform(split) + keys @ uniform(hd - split))    # the queries' half: fixed
    return {"qkv.weight": torch.cat(w_q + w_k + [uniform(dim, dim)]),
            "qkv.bias": torch.cat(b_q + b_k + [uniform(dim)]),
            "proj.weight": uniform(dim, dim), "proj.bias": uniform(dim)}


@pytest.mark.points(10)
@pytest.mark.parametrize("dim,n_heads,dtype", [(24, 4, "float64"), (12, 3, "float32")],
                         ids=["dim24-h4-float64", "dim12-h3-float32"])
def test_equal_scores_average_the_past(student, written_by_hand, gated, dim, n_heads, dtype):
    """With every score equal, position t outputs proj(mean of v over keys 0..t)"""
    g = torch.Generator().manual_seed(secrets.randbits(62))
    B, T = (1, 3)[int(torch.randint(2, (1,), generator=g))], int(torch.randint(3, 8, (1,), generator=g))
    weights = {k: v.to(DTYPES[dtype]).double() for k, v in equal_score_weights(dim, n_heads, g).items()}
    module = student.new(dim, n_heads, dtype=dtype)
    module.set_params({k: v.to(DTYPES[dtype]) for k, v in weights.items()})
    x = random_input(B, T, dim, seed=int(torch.randint(1 << 30, (1,), generator=g)), dtype=dtype)
    v = x.double() @ weights["qkv.weight"][2 * dim:].T + weights["qkv.bias"][2 * dim:]   # (B, T, dim)
    mean = v.cumsum(dim=1) / torch.arange(1, T + 1, dtype=torch.float64)[None, :, None]
    expected = mean @ weights["proj.weight"].T + weights["proj.bias"]                    # (B, T, dim)
    problem = compare(module(x), expected, dtype=dtype)
    if problem:
        pytest.fail("with every score equal, the weights of position t are 1/(t+1) on keys 0..t, so "
                    "position t must output proj(mean of v over positions 0..t)\n"
                    f"case: {describe_case(dim, n_heads, x, None, dtype)}, every score in each head "
                    f"equal (the keys differ only in directions orthogonal to the queries)\n{problem}")
