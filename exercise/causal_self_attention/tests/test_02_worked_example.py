"""The statement's worked example: equal scores average the past."""
import pytest
import torch

from exercise.causal_self_attention.checks import DTYPES, compare, describe_case, random_input
from exercise.causal_self_attention.reference import random_weights


@pytest.mark.points(10)
@pytest.mark.parametrize("dim,n_heads,T,dtype", [(24, 4, 3, "float64"), (12, 3, 5, "float32")],
                         ids=["dim24-h4-T3-float64", "dim12-h3-T5-float32"])
def test_equal_scores_average_the_past(student, written_by_hand, dim, n_heads, T, dtype):
    """With q = 0 every score is equal: position t outputs proj(mean of v over keys 0..t)"""
    weights = random_weights(dim, seed=21)
    weights["qkv.weight"][:dim] = 0          # q rows: every query is zero, so every score is 0
    weights["qkv.bias"][:dim] = 0
    weights = {k: v.to(DTYPES[dtype]).double() for k, v in weights.items()}
    module = student.new(dim, n_heads, dtype=dtype)
    module.set_params({k: v.to(DTYPES[dtype]) for k, v in weights.items()})
    x = random_input(2, T, dim, seed=22, dtype=dtype)
    v = x.double() @ weights["qkv.weight"][2 * dim:].T + weights["qkv.bias"][2 * dim:]   # (B, T, dim)
    mean = v.cumsum(dim=1) / torch.arange(1, T + 1, dtype=torch.float64)[None, :, None]
    expected = mean @ weights["proj.weight"].T + weights["proj.bias"]                    # (B, T, dim)
    problem = compare(module(x), expected, dtype=dtype)
    if problem:
        pytest.fail("with every score equal, the weights of position t are 1/(t+1) on keys 0..t, so "
                    "position t must output proj(mean of v over positions 0..t)\n"
                    f"case: {describe_case(dim, n_heads, x, None, dtype)}, q = 0\n{problem}")
