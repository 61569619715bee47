"""The main check: the same output as nn.MultiheadAttention with the same weights."""
import pytest

from exercise.causal_self_attention import reference
from exercise.causal_self_attention.checks import (BATCHES, SHAPE_IDS, SHAPES, compare, describe_case,
                                                   new_module)
from exercise.causal_self_attention.groups import graded

# Every shape in both dtypes (one case per shape: fewer cases cost less of pytest's own time per
# grade) in eval mode, and two cases in training mode: the exercise has no dropout, so the layer
# must give the same output whatever its mode.
BOTH = ("float32", "float64")
CASES = [(dim, h, BOTH, False) for dim, h in SHAPES] + [(24, 4, ("float32",), True), (8, 1, ("float64",), True)]
IDS = SHAPE_IDS + ["dim24-h4-float32-train", "dim8-h1-float64-train"]


@graded
@pytest.mark.parametrize("dim,n_heads,dtypes,train", CASES, ids=IDS)
def test_matches_multihead_attention(student, draws, written_by_hand, dim, n_heads, dtypes, train):
    failures = []
    for dtype in dtypes:
        label = ("mha", dim, n_heads, dtype, train)
        module, weights = new_module(student, dim, n_heads, dtype=dtype, seed=draws.integer(0, 2 ** 40, *label), train=train)
        inputs = [draws.normal(B, T, dim, label=(*label, B, T), dtype=dtype) for B, T in draws.shuffled(BATCHES, *label)]
        for x, out in zip(inputs, module.map([(x,) for x in inputs])):
            problem = compare(out, reference.attention(weights, n_heads, x), dtype=dtype)
            if problem:
                failures.append((describe_case(dim, n_heads, x, None, dtype) + (", training mode" if train else ""),
                                 problem))
    if failures:
        case, problem = failures[0]
        others = "".join(f"\nalso wrong: {c}" for c, _ in failures[1:4])
        more = f"\n(and {len(failures) - 4} more cases)" if len(failures) > 4 else ""
        mode = ("\nIn training mode (module.train()) the layer must give the same output as in eval mode: "
                "the exercise has no dropout." if train else "")
        pytest.fail(f"case: {case}\n{problem}{others}{more}{mode}")
