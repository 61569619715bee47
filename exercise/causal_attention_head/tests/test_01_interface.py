"""The function, and the shapes and dtypes of what it returns."""
import pytest

from exercise.causal_attention_head.checks import DTYPES, describe, drawn_qkv
from exercise.causal_attention_head.groups import graded


@graded
@pytest.mark.parametrize("dtype", DTYPES)
def test_returns_out_and_weights(student, draws, dtype):
    inputs = drawn_qkv(draws, ("interface", dtype), dtype)
    for (q, _k, _v), (out, weights) in zip(inputs, student.function().map(inputs)):
        B, T, d_k = q.shape
        for name, got, shape in (("out", out, (B, T, d_k)), ("weights", weights, (B, T, T))):
            if tuple(got.shape) != shape:
                pytest.fail(f"with q, k, v of shape {(B, T, d_k)}: got {name} of shape {tuple(got.shape)}, "
                            f"expected {shape}" + (" (return out, weights in that order)"
                                                   if name == "out" and tuple(got.shape) == (B, T, T) else ""))
            if got.dtype != q.dtype:
                pytest.fail(f"with {dtype} inputs ({describe(q, dtype)}): got {name} in "
                            f"{str(got.dtype).removeprefix('torch.')}, expected {dtype} (compute in the input's dtype)")
