"""The output: PyTorch's own causal attention, and the statement's example of equal scores."""
import pytest
import torch

from exercise.causal_attention_head import reference
from exercise.causal_attention_head.checks import (DTYPES, answers_and_gate, compare, describe, drawn_qkv,
                                                  first_failures, require_attention)
from exercise.causal_attention_head.groups import graded


@graded
@pytest.mark.parametrize("dtype", DTYPES)
def test_output_matches_sdpa(student, draws, written_by_hand, dtype):
    inputs = drawn_qkv(draws, ("output", dtype), dtype)
    failures = []
    for (q, k, v), (out, _) in zip(inputs, student.function().map(inputs)):
        problem = compare(out, reference.attention(q, k, v)[0], what="out", dtype=dtype)
        if problem:
            failures.append((describe(q, dtype), problem))
    if failures:
        pytest.fail(first_failures(failures))


EQUAL_CASES = [(1, 3, 2), (2, 9, 5), (1, 40, 8)]   # (B, T, d_k); equal scores need d_k >= 2


@graded
@pytest.mark.parametrize("dtype", DTYPES)
def test_equal_scores_average_the_past(student, draws, written_by_hand, dtype):
    label = ("equal", dtype)
    equal = [reference.equal_score_qkv(B, T, d, seed=draws.integer(0, 2 ** 62, label, i), dtype=dtype)
             for i, (B, T, d) in enumerate(EQUAL_CASES)]
    # Ordinary inputs of the same shapes go with them, in a drawn order, and the read-out of the
    # whole call must be attention: a function that recognises equal scores and averages only
    # then, doing something else elsewhere, earns nothing here.
    ordinary = drawn_qkv(draws, label, dtype, cases=EQUAL_CASES)
    answers, problem = answers_and_gate(student, draws, equal + ordinary, dtype, label)
    require_attention(problem)
    for (q, _k, v), (out, weights) in zip(equal, answers):
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
