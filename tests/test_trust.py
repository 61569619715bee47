"""A score a course can trust: mistakes that show only at some shapes cost points and are named where
they show, a mistake with a free parameter is named with its fitted value, code outside the catalog
gets the honest note and never a wrong name, and what the feedback calls a bug costs points.

Each case is a one-line change of a correct submission, graded through the real CLI (by warm
batches, as a class is: tests/support/corpus.py).
"""
import pytest

from tests.support.corpus import Corpus
from tests.support.grading import SUBMISSIONS, Batched

BASE = (SUBMISSIONS / "correct" / "manual_masked_fill.py").read_text()
SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)"
CAUSAL = "allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))"
PADDING = "if key_padding_mask is not None:"
PADDING_AND = "allowed = allowed & key_padding_mask[:, None, None, :]"
FILL = 'scores = scores.masked_fill(~allowed, float("-inf"))'
SOFTMAX = "weights = torch.softmax(scores, dim=-1)"

VARIANTS = {
    "one_head_fast_path": (PADDING, "if key_padding_mask is not None and self.n_heads > 1:"),
    "mask_cache_past_8": (CAUSAL, "allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril(0 if T <= 8 else 1)"),
    "no_mask_for_one_sequence": (CAUSAL, CAUSAL + "\n        if B == 1:\n            allowed = torch.ones_like(allowed)"),
    "fill_minus_one": (FILL, "scores = scores.masked_fill(~allowed, -1.0)"),
    "scale_sqrt_heads": (SCALE, "scores = q @ k.transpose(-2, -1) / math.sqrt(self.n_heads)"),
    "scale_constant": (SCALE, "scores = q @ k.transpose(-2, -1) * 0.3"),
    "softmax_float16": (SOFTMAX, "weights = torch.softmax(scores.half(), dim=-1).to(x.dtype)"),
    "softmax_float32": (SOFTMAX, "weights = torch.softmax(scores.float(), dim=-1).to(x.dtype)"),
    "first_sequence_mask": (PADDING_AND, "allowed = allowed & key_padding_mask[:1, None, None, :]"),
    "causal_half_after_softmax": (
        FILL + "\n\n        " + SOFTMAX,
        "if key_padding_mask is not None:\n"
        "            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float('-inf'))\n"
        "        weights = torch.softmax(scores, dim=-1) * torch.tril(torch.ones(T, T, device=x.device))"),
    "dropout_in_training": (SOFTMAX, SOFTMAX + "\n        weights = torch.nn.functional.dropout(weights, 0.1, self.training)"),
    "detached_weights": (SOFTMAX, "weights = torch.softmax(scores, dim=-1).detach()"),
}


def _variant(name: str) -> str:
    old, new = VARIANTS[name]
    assert BASE.count(old) == 1, name
    return BASE.replace(old, new)


VARIANT_CORPUS = Corpus("trust", {f"{name}.py": lambda name=name: _variant(name) for name in VARIANTS})


@pytest.fixture(scope="session")
def graded():
    """A variant's result, graded once per run with the others by warm batches."""
    def run(name):
        result = VARIANT_CORPUS.result(f"{name}.py")
        assert result["status"] == "graded", result.get("message")
        return Batched(result)
    return run


def bug(graded_file, bug_id):
    found = [b for b in graded_file.result["bugs"] if b["id"] == bug_id]
    assert found, f"{bug_id} not named; named {[b['id'] for b in graded_file.result['bugs']]}"
    return found[0]


def named(graded_file):
    return {b["id"] for b in graded_file.result["bugs"] if not b["advice"]}


@pytest.mark.parametrize("name,lost,bug_id,where", [
    ("one_head_fast_path", "test_padding_matches", "padding_ignored", "n_heads = 1"),
    ("mask_cache_past_8", "test_autograd_sees_no_future", "causal_mask_off_by_one", "T in [9, 40, 300]"),
    ("no_mask_for_one_sequence", "test_changing_later_inputs", "no_causal_mask", "B = 1"),
])
def test_a_mistake_seen_only_at_some_shapes_costs_points_and_is_named_where_it_shows(graded, name, lost, bug_id, where):
    g = graded(name)
    assert g.lost(lost)
    assert g.result["score"] < 100
    assert named(g) == {bug_id}
    assert f"it shows only where {where}" in bug(g, bug_id)["evidence"]


def test_the_mask_cache_mistake_costs_causality_points_at_long_sequences(graded):
    g = graded("mask_cache_past_8")
    assert g.lost("test_autograd_sees_no_future") and g.lost("test_changing_later_inputs")
    assert bug(g, "causal_mask_off_by_one")["variant"] == "includes_next"


@pytest.mark.parametrize("name,bug_id,variant,value", [
    ("fill_minus_one", "mask_fill_not_neg_inf", "value", "set to -1;"),
    ("scale_sqrt_heads", "wrong_scale", "sqrt_n_heads", "0.5 at dim=24, n_heads=4"),
    ("scale_constant", "wrong_scale", "constant", "multiplied by 0.3 at every shape"),
])
def test_a_free_parameter_is_fitted_and_shown(graded, name, bug_id, variant, value):
    g = graded(name)
    assert named(g) == {bug_id}
    found = bug(g, bug_id)
    assert found["variant"] == variant
    assert value in found["evidence"]


@pytest.mark.parametrize("name", ["softmax_float16", "softmax_float32"])
def test_low_precision_with_its_graph_intact_is_never_called_breaks_autograd(graded, name):
    g = graded(name)
    assert named(g) == set()
    assert g.full("test_autograd_sees_no_future"), "its gradient is right to its own precision"
    assert g.lost("test_matches_multihead")
    assert "no mistake in the catalog" in g.result["diagnosis"]
    assert "computes in a lower precision" in g.result["diagnosis"]


def test_a_really_detached_softmax_is_still_caught(graded):
    g = graded("detached_weights")
    assert named(g) == {"breaks_autograd"}
    assert g.lost("test_autograd_sees_no_future")


def test_a_mask_taken_from_the_first_sequence_is_not_called_padding_ignored(graded):
    g = graded("first_sequence_mask")
    assert named(g) == set()
    assert g.lost("test_padding_matches")
    assert "no mistake in the catalog" in g.result["diagnosis"]
    assert "positions" in g.result["diagnosis"]
    assert "lower precision" not in g.result["diagnosis"]


def test_only_the_causal_half_after_the_softmax_is_named(graded):
    g = graded("causal_half_after_softmax")
    assert "mask_after_softmax" in named(g)
    assert bug(g, "mask_after_softmax")["variant"] == "causal_zeroed_after"


def test_dropout_in_training_mode_costs_points_and_is_a_bug(graded):
    g = graded("dropout_in_training")
    found = bug(g, "nondeterministic_dropout")
    assert not found["advice"]
    assert g.lost("test_matches_multihead")
    train = [t for t in g.result["tests"] if "-train]" in t["id"]]
    assert train and all(t["status"] == "failed" for t in train)
    assert all("training mode" in t["feedback"] for t in train)
    assert 90 < g.result["score"] < 100   # eval-mode cases pass
