"""The output: PyTorch's own causal attention, and the statement's example of equal scores."""
import pytest
import torch

from exercise.causal_attention_head import reference
from exercise.causal_attention_head.checks import CASES, DTYPES, compare, describe, first_failures


@pytest.mark.points(30)
@pytest.mark.parametrize("dtype", DTYPES)
def test_output_matches_sdpa(student, written_by_hand, dtype):
    """out equals F.scaled_dot_product_attention(q, k, v, is_causal=True)"""
    inputs = [reference.random_qkv(B, T, d, seed=50 + i, dtype=dtype) for i, (B, T, d) in enumerate(CASES)]
    failures = []
    for (q, k, v), (out, _) in zip(inputs, student.function().map(inputs)):
        problem = compare(out, reference.attention(q, k, v)[0], what="out", dtype=dtype)
        if problem:
            failures.append((describe(q, dtype), problem))
    if failures:
        pytest.fail(first_failures(failures))


EQUAL_CASES = [(1, 3, 2), (2, 9, 5), (1, 40, 8)]   # (B, T, d_k); equal scores need d_k >= 2


@pytest.mark.points(10)
@pytest.mark.parametrize("dtype", DTYPES)
def test_equal_scores_average_the_past(student, written_by_hand, dtype):
    """Equal scores: weights[t] = 1/(t+1) on keys 0..t, and out[t] the mean of v[0..t]"""
    inputs = [reference.equal_score_qkv(B, T, d, seed=60 + i, dtype=dtype) for i, (B, T, d) in enumerate(EQUAL_CASES)]
    for (q, k, v), (out, weights) in zip(inputs, student.function().map(inputs)):
        T = q.shape[1]
        counts = torch.arange(1, T + 1, dtype=torch.float64)
        expected_w = (torch.ones(T, T, dtype=torch.float64).tril() / counts[:, None]).expand(q.shape[0], T, T)
        expected_out = v.double().cumsum(dim=1) / counts[None, :, None]
        for what, got, want in (("weights", weights, expected_w), ("out", out, expected_out)):
            problem = compare(got, want, what=what, dtype=dtype)
            if problem:
                pytest.fail(f"{describe(q, dtype)}, every score of a row equal (q_t . k_s the same for every "
                            f"key s):\n{problem}\nWith equal scores, position t must average v over positions "
                            f"0..t: weights [1], [1/2, 1/2], [1/3, 1/3, 1/3], ...")
