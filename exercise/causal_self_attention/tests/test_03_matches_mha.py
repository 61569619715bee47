"""The main check: the same output as nn.MultiheadAttention with the same weights."""
import pytest

from exercise.causal_self_attention import reference
from exercise.causal_self_attention.checks import compare, describe_case, new_module, random_input

SHAPES = [(8, 1), (8, 2), (12, 3), (24, 4), (32, 8)]


@pytest.mark.points(30)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim,n_heads", SHAPES, ids=[f"dim{d}-h{h}" for d, h in SHAPES])
def test_matches_multihead_attention(student, written_by_hand, dim, n_heads, dtype):
    """Same output as nn.MultiheadAttention with your weights copied in"""
    module, weights = new_module(student, dim, n_heads, dtype=dtype, seed=dim + n_heads)
    inputs = [random_input(B, T, dim, seed=100 * T + B, dtype=dtype) for T in (1, 2, 7, 40) for B in (1, 3)]
    failures = []
    for x, out in zip(inputs, module.map([(x,) for x in inputs])):
        problem = compare(out, reference.attention(weights, n_heads, x), dtype=dtype)
        if problem:
            failures.append((describe_case(dim, n_heads, x, None, dtype), problem))
    if failures:
        case, problem = failures[0]
        others = "".join(f"\nalso wrong: {c}" for c, _ in failures[1:4])
        more = f"\n(and {len(failures) - 4} more cases)" if len(failures) > 4 else ""
        pytest.fail(f"case: {case}\n{problem}{others}{more}")
