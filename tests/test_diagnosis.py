"""The diagnosis names each mistake by its behaviour: every realization in the corpus gets exactly its
own id, two-bug files get both, correct files get none, and an unknown mistake gets an honest note."""
import pytest

from tests.conftest import SUBMISSIONS, grade

BUGGY = sorted((SUBMISSIONS / "buggy").glob("*.py"))
UNKNOWN = sorted((SUBMISSIONS / "unknown").glob("*.py"))


def declared(path) -> set[str]:
    first = path.read_text().splitlines()[0]
    return {i.strip() for i in first.removeprefix("# bug:").split(",") if i.strip() not in ("", "trivial")}


def test_the_corpus_is_large_enough():
    from exercise.causal_self_attention.catalog import CATALOG
    counts = {bug_id: sum(bug_id in declared(p) for p in BUGGY if not p.name.startswith("pair__"))
              for bug_id in CATALOG}
    assert {k: v for k, v in counts.items() if v < 3} == {}
    assert sum(p.name.startswith("pair__") for p in BUGGY) >= 3
    assert len(UNKNOWN) >= 15
    assert len(list((SUBMISSIONS / "correct").iterdir())) >= 31


# Realizations the diagnosis does not name, and why: an honest "no known mistake" note, never a guess.
UNNAMED = {
    "no_causal_mask__chunked_last_chunk.py": "only positions 32..38 of T = 40 see the future, which a "
                                             "mask built for 32 positions reproduces as well: two names fit",
    "padding_inverted__additive_loop.py": "a -1e9 penalty added to scores in float32 wipes out the real "
                                          "keys' scores, which no model reproduces",
}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=UNNAMED[p.name]))
                                  if p.name in UNNAMED else p for p in BUGGY], ids=[p.name for p in BUGGY])
def test_realization_is_diagnosed_exactly(corpus_graded, path):
    result = corpus_graded[f"buggy/{path.name}"].result
    assert result["status"] == "graded"
    assert {b["id"] for b in result["bugs"]} == declared(path)
    for bug in result["bugs"]:
        assert bug["title"] and bug["explanation"] and bug["fix"] and bug["evidence"]


@pytest.mark.parametrize("path", UNKNOWN, ids=[p.name for p in UNKNOWN])
def test_mistake_outside_the_catalog_loses_points_gets_the_note_and_no_name(corpus_graded, path):
    result = corpus_graded[f"unknown/{path.name}"].result
    assert result["status"] == "graded"
    assert result["score"] < result["max_score"]
    assert [b["id"] for b in result["bugs"] if not b["advice"]] == []
    assert "no mistake in the catalog" in result["diagnosis"]


def test_bugs_reach_the_affected_tests_and_the_top_of_the_feedback(grade_cached):
    graded = grade_cached(SUBMISSIONS / "buggy" / "mask_after_softmax__masked_fill_zero.py")
    tagged = [t for t in graded.result["tests"] if "mask_after_softmax" in t["bugs"]]
    assert tagged and all(t["status"] != "passed" for t in tagged)
    assert any("test_matches_multihead_attention" in t["group"] for t in tagged)
    top = graded.terminal.split("Test group")[0]
    assert "Bug: The causal mask is applied after the softmax" in top and "Fix:" in top


def test_advice_costs_no_points(grade_cached):
    result = grade_cached(SUBMISSIONS / "buggy" / "mask_device_mismatch__ones_tril.py").result
    assert result["score"] == 100
    assert [b["id"] for b in result["bugs"]] == ["mask_device_mismatch"] and result["bugs"][0]["advice"]


def test_forbidden_builtin_gets_no_points_for_the_comparison_tests(grade_cached):
    result = grade_cached(SUBMISSIONS / "buggy" / "uses_forbidden_builtin__mha_inside.py").result
    for test in result["tests"]:
        if any(g in test["group"] for g in ("test_matches_multihead", "test_padding_matches", "test_equal_scores")):
            assert test["score"] == 0 and "nn.MultiheadAttention" in test["feedback"]
    assert result["score"] <= 48


def test_unknown_mistake_gets_an_honest_note_and_no_guess(tmp_path):
    source = (SUBMISSIONS / "correct" / "manual_masked_fill.py").read_text()
    path = tmp_path / "odd.py"
    path.write_text(source.replace("return self.proj(", "return 1.5 * self.proj("))
    result = grade(path).result
    assert result["bugs"] == []
    assert "no mistake in the catalog" in result["diagnosis"]
    assert "positions" in result["diagnosis"]


# A value of each fitted mistake's free parameter at which it shows (mistakes.FITTED).
SHOWING = {("wrong_scale", "factor"): 0.5, ("mask_fill_not_neg_inf", "value"): -10.0,
           ("mask_fill_not_neg_inf", "causal_value"): -10.0}


@pytest.mark.parametrize("mistake", list(SHOWING), ids=lambda m: "-".join(m))
def test_a_fitted_mistake_at_some_shapes_only_is_named_and_localised(mistake):
    """A fitted mistake that shows at the first probe shape and not at the second (an integer
    square root for the scale is right where head_dim is a square): it is named, its model is
    evaluated only where it was fitted, and the evidence says where it shows."""
    import torch

    from exercise.causal_self_attention import diagnosis, mistakes, reference
    assert set(SHOWING) == {m for m, _ in mistakes.FITTED}, "every fitted mistake is fed through"
    observed = []
    for n, (dim, heads) in enumerate(diagnosis.PROBE_SHAPES[:2]):
        weights = reference.random_weights(dim, seed=777 + dim + heads)
        for probe in diagnosis.probes(dim, heads):
            correct = reference.attention(weights, heads, probe.x, probe.mask)
            out = mistakes.attention(weights, heads, probe.x, probe.mask, (mistake,),
                                     value=torch.tensor(SHOWING[mistake], dtype=torch.float64)) if n == 0 else correct
            observed.append(diagnosis.Observed(probe, weights, out, correct))
    wrong = [o for o in observed if o.wrong]
    assert wrong and all((o.probe.dim, o.probe.heads) == diagnosis.PROBE_SHAPES[0] for o in wrong)
    match = diagnosis._explain(wrong)
    assert not isinstance(match, list), match
    combo, values = match
    assert {bug for bug, _ in combo} == {mistake[0]}
    where = diagnosis._where_it_shows(wrong, observed, combo, values)
    first, second = diagnosis.PROBE_SHAPES[:2]
    assert f"it shows only at (dim, n_heads) = ({first[0]}, {first[1]}):" in where, where
    assert f"at ({second[0]}, {second[1]}) your output is right" in where, where
    assert diagnosis._match_evidence(combo, values, wrong, observed)  # the whole evidence is written too
