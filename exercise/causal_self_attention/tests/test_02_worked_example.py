"""The statement's worked example: equal scores average the past.

The scores are made equal without any input a module could recognise: q = 0 would be one test a
module could special-case. Here, in each head, the queries live in one half of a random rotation
of the head's space and the keys vary only in the other half, so q_t . k_s is the same for every
key s, while q, k and v are all non-zero and new for each submission. Only a module
that computes the scores sees that they are equal.
"""
import pytest
import torch

from exercise.causal_self_attention.checks import (DTYPES, LONG_T, SHAPE_IDS, SHAPES, compare, describe_case,
                                                   random_input)
from exercise.causal_self_attention.groups import graded


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


INPUTS = ((1, 1), (3, 9), (1, LONG_T))   # (B, T)
# Every shape but head_dim 1: in one dimension, equal scores for every key need keys that do not
# depend on the input (k rows of qkv all zero), which a module could recognise.
CASES = [(shape, i) for shape, i in zip(SHAPES, SHAPE_IDS) if shape[0] // shape[1] > 1]


@graded
@pytest.mark.parametrize("dim,n_heads", [c for c, _ in CASES], ids=[i for _, i in CASES])
def test_equal_scores_average_the_past(student, draws, written_by_hand, gated, dim, n_heads):
    for dtype in ("float32", "float64"):
        _check_equal_scores(student, draws, dim, n_heads, dtype)


def _check_equal_scores(student, draws, dim: int, n_heads: int, dtype: str) -> None:
    # Weights and inputs drawn from the grade's seed (the host's, never seen by the student's code;
    # the same for the same bytes, so a regrade gives the same grade), anew for each case.
    g = draws.generator("worked", dim, n_heads, dtype)
    weights = {k: v.to(DTYPES[dtype]).double() for k, v in equal_score_weights(dim, n_heads, g).items()}
    module = student.new(dim, n_heads, dtype=dtype)
    module.set_params({k: v.to(DTYPES[dtype]) for k, v in weights.items()})
    inputs = [random_input(B, T, dim, seed=int(torch.randint(1 << 30, (1,), generator=g)), dtype=dtype)
              for B, T in INPUTS]
    for x, out in zip(inputs, module.map([(x,) for x in inputs])):
        T = x.shape[1]
        v = x.double() @ weights["qkv.weight"][2 * dim:].T + weights["qkv.bias"][2 * dim:]   # (B, T, dim)
        mean = v.cumsum(dim=1) / torch.arange(1, T + 1, dtype=torch.float64)[None, :, None]
        expected = mean @ weights["proj.weight"].T + weights["proj.bias"]                    # (B, T, dim)
        problem = compare(out, expected, dtype=dtype)
        if problem:
            pytest.fail("with every score equal, the weights of position t are 1/(t+1) on keys 0..t, so "
                        "position t must output proj(mean of v over positions 0..t)\n"
                        f"case: {describe_case(dim, n_heads, x, None, dtype)}, every score in each head "
                        f"equal (the keys differ only in directions orthogonal to the queries)\n{problem}")
