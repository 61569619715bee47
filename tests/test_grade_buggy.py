"""A wrong solution loses the points of the tests its mistake affects, and keeps the rest.

Each row names the test groups a mistake must cost and those it must not, reasoned from what the
mistake does (see the research notes): a wrong scale cannot change the worked example (every score
is 0 there), a padding bug cannot change a real position under right padding, and so on.
"""
import pytest

from tests.support.corpus import graded_in_corpus
from tests.support.grading import EXAMPLES, SUBMISSIONS, Batched

LAYERS, SHAPE, WORKED, MHA = "test_layers", "test_output_shape", "test_equal_scores", "test_matches_multihead"
PAD_MHA, ALL_TRUE, PAD_LEAK = "test_padding_matches", "test_all_true_mask", "test_padded_inputs"
AUTOGRAD, PERTURB, PARAMS = "test_autograd_sees_no_future", "test_changing_later_inputs", "test_parameter_count"
INTERFACE = (LAYERS, SHAPE)
CAUSALITY = (AUTOGRAD, PERTURB)
EVERYTHING = INTERFACE + (WORKED, MHA, PAD_MHA, ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)

# file-name prefix -> (groups that must lose points, groups that must keep full points)
EXPECTED = {
    "no_causal_mask": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE + (PARAMS,)),
    "mask_after_softmax": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE + (PARAMS,)),
    "causal_mask_off_by_one__includes_next": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE + (PARAMS,)),
    "causal_mask_off_by_one__excludes_self": ((WORKED, MHA), INTERFACE),
    "wrong_scale__sqrt_dim": ((MHA, PAD_MHA), INTERFACE + (WORKED, ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)),
    "wrong_scale__no_scale": ((MHA, PAD_MHA), INTERFACE + (WORKED, ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)),
    "wrong_scale__multiply": ((MHA, PAD_MHA), INTERFACE + (WORKED, ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)),
    "wrong_scale__head_dim": ((MHA, PAD_MHA), INTERFACE + (WORKED, ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)),
    "wrong_scale__after_softmax": ((WORKED, MHA), INTERFACE + CAUSALITY + (PARAMS,)),
    "view_without_contiguous__merge": ((MHA,), (LAYERS,)),
    "view_without_contiguous__bmm": ((MHA,), (LAYERS,)),
    "view_without_contiguous__permute": ((MHA,), (LAYERS,)),
    "wrong_head_split": ((MHA, PAD_MHA), INTERFACE + (PARAMS,)),
    "wrong_head_merge": ((MHA, PAD_MHA), INTERFACE + (PARAMS,)),
    "qkv_order": ((MHA, PAD_MHA), INTERFACE + (ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)),
    "padding_ignored": ((PAD_MHA,), tuple(g for g in EVERYTHING if g != PAD_MHA)),
    "padding_inverted": ((PAD_MHA, ALL_TRUE), INTERFACE + (WORKED, MHA, PARAMS)),
    # An additive constant on every key of an all-True mask shifts whole rows: softmax ignores it.
    "padding_inverted__additive_minus": ((PAD_MHA,), tuple(g for g in EVERYTHING if g != PAD_MHA)),
    "padding_on_queries": ((PAD_MHA,), INTERFACE + (WORKED, MHA, ALL_TRUE, PAD_LEAK, PERTURB, PARAMS)),
    "mask_fill_not_neg_inf": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE + (PARAMS,)),
    # A finite fill of the padding part alone: under right padding every padded key is in a real
    # query's future, blocked by the causal -inf already, so only the padded queries show it.
    "mask_fill_not_neg_inf__padding_": ((PAD_MHA,), tuple(g for g in EVERYTHING if g != PAD_MHA)),
    "mask_fill_not_neg_inf__float_padding_bias": ((PAD_MHA,), tuple(g for g in EVERYTHING if g != PAD_MHA)),
    "softmax_wrong_dim": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE),
    # NaN outputs: a module that does not do attention's job earns the interface points at most.
    "nan_from_inf_mask": ((WORKED, MHA, PAD_MHA, AUTOGRAD, PARAMS), INTERFACE),
    # NaN with a padding mask only: every test without one keeps its points.
    "nan_from_inf_mask__padding": ((PAD_MHA, ALL_TRUE, PAD_LEAK), INTERFACE + (WORKED, MHA, PARAMS)),
    "missing_output_projection": ((WORKED, MHA, PAD_MHA), INTERFACE + (ALL_TRUE, PAD_LEAK) + CAUSALITY + (PARAMS,)),
    "params_depend_on_heads": ((LAYERS, MHA, PARAMS), (SHAPE,)),
    # The parameter count is a property of function, checked on the stated layers with the
    # grader's weights loaded (test_06): a layer without self.qkv and self.proj cannot show it.
    "wrong_layers__separate_qkv": ((LAYERS, MHA, PARAMS), (SHAPE,) + CAUSALITY),
    "wrong_layers__nanogpt_names": ((LAYERS, MHA, PARAMS), (SHAPE,) + CAUSALITY),
    "wrong_layers__no_bias": ((LAYERS, MHA, PARAMS), (SHAPE,) + CAUSALITY),
    "nondeterministic_dropout__functional": ((MHA, WORKED), INTERFACE),
    "nondeterministic_dropout__sdpa_dropout_p": ((MHA, WORKED), INTERFACE),
    # T = 40 runs in the worked example, the padding properties and the perturbation check too.
    "fixed_max_length": ((MHA, PAD_MHA, WORKED), INTERFACE + (AUTOGRAD, PARAMS)),
    # Only the last block of 16 queries sees the future: T > 16, which the Jacobian (T <= 12) never reaches.
    "no_causal_mask__chunked_last_chunk": ((WORKED, MHA, PERTURB), INTERFACE + (AUTOGRAD, PARAMS)),
    # What one call builds, kept for the next: only the padding test calls one module with several
    # masks at one length (test_04's patterns share T = 9).
    "state_between_calls": ((PAD_MHA,), tuple(g for g in EVERYTHING if g != PAD_MHA)),
    "breaks_autograd": ((AUTOGRAD,), tuple(g for g in EVERYTHING if g != AUTOGRAD)),
    # An in-place change of a view split() returned: autograd refuses it in forward, so every call raises.
    "breaks_autograd__inplace_on_split_view": (tuple(g for g in EVERYTHING if g != LAYERS), (LAYERS,)),
    "pair__qkv_order__padding_ignored": ((MHA, PAD_MHA), INTERFACE + CAUSALITY + (PARAMS,)),
    "pair__wrong_scale__mask_after_softmax": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE + (PARAMS,)),
    "pair__no_causal_mask__missing_output_projection": ((WORKED, MHA, AUTOGRAD, PERTURB), INTERFACE + (PARAMS,)),
}


def expectation(name: str):
    matches = [prefix for prefix in EXPECTED if name.startswith(prefix)]
    return EXPECTED[max(matches, key=len)] if matches else None


BUGGY = [p for p in sorted((SUBMISSIONS / "buggy").glob("*.py")) if expectation(p.name)]
BUGGY += [EXAMPLES / "mask_after_softmax.py", EXAMPLES / "padding_ignored.py"]


@pytest.mark.unit
def test_every_expectation_is_exercised():
    used = {max((p for p in EXPECTED if f.name.startswith(p)), key=len) for f in BUGGY}
    assert used == set(EXPECTED)


@pytest.mark.parametrize("path", BUGGY, ids=[p.name for p in BUGGY])
def test_mistake_costs_only_the_points_it_affects(grade_cached, path):
    lose, keep = expectation(path.name)
    in_corpus = graded_in_corpus(path)
    graded = Batched(in_corpus) if in_corpus else grade_cached(path)
    assert graded.result["status"] == "graded", graded.result.get("message")
    assert [g for g in lose if not graded.lost(g)] == [], "these groups should have lost points"
    assert [g for g in keep if not graded.full(g)] == [], "these groups should have kept full points"
    assert 0 <= graded.result["score"] < 100


@pytest.mark.parametrize("name", ["trivial__returns_input.py", "trivial__returns_zeros.py", "trivial__constant.py"])
def test_module_that_does_not_attend_earns_interface_points_at_most(corpus_graded, name):
    graded = Batched(corpus_graded[f"buggy/{name}"])
    assert graded.result["score"] <= 10
    for group in EVERYTHING[2:]:
        assert graded.lost(group), group
    causality = [t for t in graded.result["tests"] if AUTOGRAD in t["group"]]
    assert all("does not do attention's job" in t["feedback"] for t in causality)


def test_failure_feedback_shows_got_and_expected(grade_cached):
    graded = grade_cached(EXAMPLES / "mask_after_softmax.py")
    mha = [t for t in graded.result["tests"] if MHA in t["group"] and t["status"] == "failed"]
    assert mha, "the comparison with nn.MultiheadAttention must fail"
    feedback = mha[0]["feedback"]
    assert "got      out[" in feedback and "expected out[" in feedback
    assert "positions that differ" in feedback
    assert "What went wrong" in graded.terminal and "expected out[" in graded.terminal


def test_padding_bug_feedback_says_only_padded_positions_differ(grade_cached):
    graded = grade_cached(EXAMPLES / "padding_ignored.py")
    failed = [t for t in graded.result["tests"] if PAD_MHA in t["group"] and t["status"] != "passed"]
    assert failed and all("only padded query positions differ" in t["feedback"] for t in failed)


def test_exception_feedback_names_the_line(grade_cached):
    graded = grade_cached(EXAMPLES / "view_without_contiguous.py")
    errors = [t for t in graded.result["tests"] if t["status"] == "error"]
    assert errors
    assert any("view size is not compatible" in t["feedback"] and "line " in t["feedback"] for t in errors)
