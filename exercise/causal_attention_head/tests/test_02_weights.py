"""The attention weights: rows that sum to 1, nothing above the diagonal, and the right values."""
import pytest
import torch

from exercise.causal_attention_head import reference
from exercise.causal_attention_head.checks import (DTYPES, TOLERANCE, answers_and_gate, compare, describe,
                                                  drawn_qkv, first_failures, require_attention)
from exercise.causal_attention_head.groups import graded


def _gated_weights(student, draws, dtype: str, label: str):
    """The test's inputs and the weights returned for them, once the read-out says they are attention."""
    inputs = drawn_qkv(draws, (label, dtype), dtype)
    answers, problem = answers_and_gate(student, draws, inputs, dtype, (label, dtype))
    require_attention(problem)
    return inputs, [w for _, w in answers]


@graded
@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_rows_sum_to_one(student, draws, dtype):
    tol = TOLERANCE[dtype]
    for (q, _, _), w in zip(*_gated_weights(student, draws, dtype, "rows")):
        sums = w.double().sum(dim=-1)                                                # (B, T)
        bad = ~torch.isclose(sums, torch.ones_like(sums), **tol)
        if bad.any():
            b, t = (int(i) for i in bad.nonzero()[0])
            pytest.fail(f"{describe(q, dtype)}: weights[{b}, {t}, :] sums to {float(sums[b, t]):.6g}, expected 1 "
                        f"(rows {bad.any(dim=0).nonzero().flatten().tolist()[:10]} of the first wrong sequence "
                        f"and others do not); the softmax must run over the last dimension, after the mask")


@graded
@pytest.mark.parametrize("dtype", DTYPES)
def test_weights_are_zero_above_the_diagonal(student, draws, dtype):
    for (q, _, _), w in zip(*_gated_weights(student, draws, dtype, "zeros")):
        T = q.shape[1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        leak = w.double().abs().nan_to_num(nan=float("inf")) * future
        if (leak > TOLERANCE[dtype]["atol"]).any():
            b, t, s = (int(i) for i in (leak == leak.max()).nonzero()[0])
            pytest.fail(f"{describe(q, dtype)}: weights[{b}, {t}, {s}] = {float(w[b, t, s]):.4g}, expected 0: "
                        f"position {t} gives weight to the later key {s}")


@graded
@pytest.mark.parametrize("dtype", DTYPES)
def test_weights_match_the_reference(student, draws, written_by_hand, dtype):
    inputs = drawn_qkv(draws, ("weights", dtype), dtype)
    failures = []
    for (q, k, v), (_, w) in zip(inputs, student.function().map(inputs)):
        problem = compare(w, reference.attention(q, k, v)[1], what="weights", dtype=dtype)
        if problem:
            failures.append((describe(q, dtype), problem))
    if failures:
        pytest.fail(first_failures(failures))
