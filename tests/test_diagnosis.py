"""The diagnosis names each mistake by its behaviour: every realization in the corpus gets exactly its
own id, two-bug files get both, correct files get none, and an unknown mistake gets an honest note."""
import pytest

from tests.support.grading import SUBMISSIONS, grade

BUGGY = sorted((SUBMISSIONS / "buggy").glob("*.py"))
UNKNOWN = sorted((SUBMISSIONS / "unknown").glob("*.py"))


def declared(path) -> set[str]:
    first = path.read_text().splitlines()[0]
    return {i.strip() for i in first.removeprefix("# bug:").split(",") if i.strip() not in ("", "trivial")}


@pytest.mark.unit
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
}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=UNNAMED[p.name]))
                                  if p.name in UNNAMED else p for p in BUGGY], ids=[p.name for p in BUGGY])
def test_realization_is_diagnosed_exactly(corpus_graded, path):
    result = corpus_graded[f"buggy/{path.name}"]
    assert result["status"] == "graded"
    assert {b["id"] for b in result["bugs"]} == declared(path)
    for bug in result["bugs"]:
        assert bug["title"] and bug["explanation"] and bug["fix"] and bug["evidence"]


@pytest.mark.parametrize("path", UNKNOWN, ids=[p.name for p in UNKNOWN])
def test_mistake_outside_the_catalog_loses_points_gets_the_note_and_no_name(corpus_graded, path):
    result = corpus_graded[f"unknown/{path.name}"]
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


def test_advice_costs_no_points(corpus_graded):
    result = corpus_graded["buggy/mask_device_mismatch__ones_tril.py"]
    assert result["score"] == 100
    assert [b["id"] for b in result["bugs"]] == ["mask_device_mismatch"] and result["bugs"][0]["advice"]


def test_forbidden_builtin_gets_no_points_for_the_comparison_tests(corpus_graded):
    result = corpus_graded["buggy/uses_forbidden_builtin__mha_inside.py"]
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
           ("mask_fill_not_neg_inf", "causal_value"): -10.0, ("mask_fill_not_neg_inf", "padding_value"): 0.0,
           ("mask_fill_not_neg_inf", "additive"): -1.0, ("mask_fill_not_neg_inf", "padding_additive"): -1.0,
           ("padding_inverted", "additive"): -1e9}


@pytest.mark.unit
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


@pytest.mark.unit
@pytest.mark.slow  # 2.5 to 4 s each, 20 s together: the whole run keeps them, the fast lane does not
@pytest.mark.parametrize("mistake", __import__("exercise.causal_self_attention.mistakes",
                                                fromlist=["BUFFERS"]).BUFFERS, ids=lambda m: m[1])
def test_a_mask_made_for_a_fixed_length_is_named_with_what_it_does_past_it_and_the_length(mistake):
    """Whatever a mask made for N positions does past N (opened, emptied, the diagonal alone,
    positions clamped, counted modulo N, cut in blocks), at any N the probes reach: the length is
    the measured one (Observed.right_up_to), the behaviour is told apart, and the evidence says
    where the output stops being right."""
    import torch

    from exercise.causal_self_attention import diagnosis, mistakes, reference
    for length in (7, 23, 64, 257):
        observed = []
        weights = reference.random_weights(diagnosis.DIM, seed=5)
        for probe in diagnosis.probes():
            correct = reference.attention(weights, diagnosis.HEADS, probe.x, probe.mask)
            out = mistakes.attention(weights, diagnosis.HEADS, probe.x, probe.mask, (mistake,),
                                     value=torch.tensor(float(length)))
            observed.append(diagnosis.Observed(probe, weights, out, correct, right_up_to=length))
        combo, values = _named(observed)
        assert combo == (mistake,) and set(values.values()) == {length}, (length, combo, values)
        wrong = [o for o in observed if o.wrong]
        assert f"right for sequences up to length {length} and wrong from {length + 1} on" in \
            diagnosis._match_evidence(combo, values, wrong, observed)


def _observed(out_of, shapes, dtypes=("float64", "float32")):
    """The diagnosis's probes at these shapes, with `out_of(weights, heads, probe)` as the output."""
    from exercise.causal_self_attention import diagnosis, reference
    observed = []
    for dim, heads in shapes:
        weights = reference.random_weights(dim, seed=777 + dim + heads)
        for dtype in dtypes:
            for probe in diagnosis.probes(dim, heads, dtype):
                correct = reference.attention(weights, heads, probe.x, probe.mask)
                out = out_of(weights, heads, probe)
                observed.append(diagnosis.Observed(probe, weights, out.to(probe.x.dtype), correct))
    return observed


def _named(observed):
    from exercise.causal_self_attention import diagnosis
    match = diagnosis._explain(sorted((o for o in observed if o.wrong), key=lambda o: o.out.numel()))
    assert not isinstance(match, list), match
    return match


@pytest.mark.slow
@pytest.mark.unit
def test_the_padded_probes_put_the_full_sequence_first_in_the_middle_and_last():
    """A mask skipped when the batch's first sequence is full is failed by the tests; the probes
    must meet it with the first sequence full, and also with the full one in the middle and last."""
    from exercise.causal_self_attention import diagnosis, mistakes
    masks = [p.mask for p in diagnosis.probes() if p.mask is not None and p.mask.shape[0] > 1 and not p.mask.all()]
    full_at = {int(row) for m in masks for row in m.all(dim=1).nonzero()[:, 0]}
    assert {0, 1, 2} <= full_at

    def skipped_when_first_full(weights, heads, probe):
        skip = probe.mask is not None and bool(probe.mask[0].all())
        return mistakes.attention(weights, heads, probe.x, None if skip else probe.mask)

    combo, _ = _named(_observed(skipped_when_first_full, diagnosis.PROBE_SHAPES[:1], dtypes=("float64",)))
    assert combo == (("padding_ignored", "ignored"),)


@pytest.mark.slow
@pytest.mark.unit
def test_every_order_of_the_merged_axes_is_named_with_its_order():
    """Fit, don't enumerate: the heads' output (B, H, T, hd) read as (B, T, dim) after any of the 23
    wrong orders of its axes is named wrong_head_merge, with the order it was read in."""
    import itertools

    from exercise.causal_self_attention import diagnosis, mistakes
    assert len(mistakes.MERGES) == 23
    for perm in itertools.permutations(range(4)):
        if perm == (0, 2, 1, 3):
            continue

        def merged(weights, heads, probe, perm=perm):
            return mistakes.attention(weights, heads, probe.x, probe.mask, (("wrong_head_merge", mistakes.MERGES[perm]),))

        combo, _ = _named(_observed(merged, diagnosis.PROBE_SHAPES[:1], dtypes=("float64",)))
        assert combo == (("wrong_head_merge", mistakes.MERGES[perm]),), perm


def _hugging_face_padding_forgotten_one_minus(weights, heads, probe):
    """mask * finfo(dtype).min added to the scores, `1 -` forgotten; causal part -inf; in the
    probe's dtype, as a student's module computes it."""
    import math

    import torch
    x, dtype = probe.x, probe.x.dtype
    B, T, C = x.shape
    w = {k: v.to(dtype) for k, v in weights.items()}
    q, k, v = (x @ w["qkv.weight"].T + w["qkv.bias"]).split(C, dim=-1)
    q, k, v = (t.reshape(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
    s = q @ k.transpose(-2, -1) / math.sqrt(C // heads)
    if probe.mask is not None:
        s = s + probe.mask[:, None, None, :].to(dtype) * torch.finfo(dtype).min
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    out = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    return out @ w["proj.weight"].T + w["proj.bias"]


@pytest.mark.unit
@pytest.mark.parametrize("realisation, expected", [
    (_hugging_face_padding_forgotten_one_minus, ("padding_inverted", "additive")),
    (("mask_fill_not_neg_inf", "additive", -1.0), ("mask_fill_not_neg_inf", "additive")),   # SDPA given a float keep-mask
    (("mask_fill_not_neg_inf", "padding_additive", -7.0), ("mask_fill_not_neg_inf", "padding_additive")),
    (("mask_fill_not_neg_inf", "padding_value", 0.0), ("mask_fill_not_neg_inf", "padding_value")),   # padding multiplied
    (("mask_fill_not_neg_inf", "row_min", None), ("mask_fill_not_neg_inf", "row_min")),
    (("mask_fill_not_neg_inf", "row_mean", None), ("mask_fill_not_neg_inf", "row_mean")),
    (("mask_fill_not_neg_inf", "row_max", None), ("mask_fill_not_neg_inf", "row_max")),
    (("mask_fill_not_neg_inf", "allowed_mean", None), ("mask_fill_not_neg_inf", "allowed_mean")),
    (("mask_fill_not_neg_inf", "allowed_min", None), ("mask_fill_not_neg_inf", "allowed_min")),
], ids=["hf_finfo_min_inverted", "float_keep_mask", "padding_additive", "padding_multiplied", "row_min", "row_mean",
        "row_max", "allowed_mean", "allowed_min"])
def test_masks_added_filled_from_the_data_or_applied_in_part_are_named(realisation, expected):
    """Additive masks of any size (float32's and float64's most negative number included) and of
    either sign, fills computed from the scores, and a mask applied to its padding part only."""
    import torch

    from exercise.causal_self_attention import diagnosis, mistakes
    if callable(realisation):
        out_of = realisation
    else:
        bug_id, variant, value = realisation
        value = None if value is None else torch.tensor(value, dtype=torch.float64)
        out_of = lambda w, h, p: mistakes.attention(w, h, p.x, p.mask, ((bug_id, variant),), value=value,  # noqa: E731
                                                    dtype=str(p.x.dtype).removeprefix("torch."))
    combo, values = _named(_observed(out_of, diagnosis.PROBE_SHAPES[:2]))
    assert combo == (expected,)
    if expected == ("padding_inverted", "additive"):
        assert all(v < -1e30 for v in values.values()), values   # the dtype's most negative number, fitted per dtype


class _InProcess:
    """A stand-in for the sandbox's handle on a student's class, run in this process (no student
    code: the modules below are the test's own)."""

    def __init__(self, cls):
        self.cls = cls

    def new(self, dim, heads, train=False, dtype="float64"):
        import torch
        module = self.cls(dim, heads).to(getattr(torch, dtype)).train(train)

        class Handle:
            def set_params(self, params):
                with torch.no_grad():
                    for name, value in params.items():
                        module.get_parameter(name).copy_(value)

            def map(self, calls, context=None):
                with torch.no_grad():
                    return [module(*args) for args in calls]

        return Handle()


def _attention_module(drop=None):
    """The reference layer as an nn.Module, with `drop(y, training)` applied to the heads' output."""
    import torch
    from torch import nn

    from exercise.causal_self_attention import reference

    class Layer(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x, mask=None):
            B, T, C = x.shape
            q, k, v = (t.reshape(B, T, self.heads, C // self.heads).transpose(1, 2)
                       for t in self.qkv(x).split(C, dim=-1))
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            if drop is not None:
                y = drop(y, self.training)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

    assert reference  # the layer is the reference's: SDPA with is_causal and no mask
    return Layer


def _drop_head(y, training, p=0.1):
    import torch
    if not training:
        return y
    keep = (torch.rand(y.shape[0], y.shape[1], 1, 1) >= p).to(y.dtype)
    return y * keep / (1 - p)


def _drop_rows(y, training, p=0.05):
    import torch
    if not training:
        return y
    return y * torch.bernoulli(torch.full((*y.shape[:3], 1), 1 - p, dtype=y.dtype)) / (1 - p)


@pytest.mark.unit
@pytest.mark.parametrize("drop, shown", [
    (_drop_head, "whole heads of one sequence"), (_drop_rows, "single rows"),
    (lambda y, training: torch_dropout(y, 0.02, training), "single attention weights"),
], ids=["drophead_p0.1", "rows_p0.05", "elements_p0.02"])
def test_training_mode_dropout_is_found_with_its_rescale_and_what_it_drops(drop, shown):
    """Dropout of 1 in 10 (sequence, head) pairs is found every time: 8 training-mode calls of 4
    sequences x 4 heads, and the 1/(1-p) rescale against eval mode; the evidence says p and what
    is dropped."""
    import torch

    from exercise.causal_self_attention import diagnosis
    for seed in range(5):
        torch.manual_seed(seed)
        found = diagnosis.Diagnosis()
        diagnosis._training_mode(_InProcess(_attention_module(drop)), found)
        assert found.ids() == {"nondeterministic_dropout"}, seed
        evidence = found.findings[0].evidence
        assert shown in evidence and "1/(1 - p)" in evidence, evidence


def torch_dropout(y, p, training):
    import torch
    return torch.nn.functional.dropout(y, p, training)


@pytest.mark.unit
def test_training_mode_without_dropout_is_not_named():
    from exercise.causal_self_attention import diagnosis
    found = diagnosis.Diagnosis()
    diagnosis._training_mode(_InProcess(_attention_module()), found)
    assert found.findings == []


@pytest.mark.unit
def test_the_device_stand_in_checks_every_operation_as_a_gpu_does():
    """The meta device's in-place masked_fill_ and += take a CPU tensor without a word (CUDA's raise);
    in the worker's one-device mode they raise as on a GPU, while a 0-dim CPU tensor, which a GPU
    takes as a number, still goes."""
    import torch

    from sandbox.worker import _one_device
    scores = torch.zeros(2, 4, 4, device="meta")
    cpu_mask = torch.ones(4, 4, dtype=torch.bool).triu(1)
    scores.masked_fill_(cpu_mask, float("-inf"))      # the meta device alone does not check
    for op in (lambda: scores.masked_fill_(cpu_mask, float("-inf")), lambda: scores.__iadd__(cpu_mask.double())):
        with pytest.raises(RuntimeError, match="same device, but found at least two devices, cpu and meta"):
            with _one_device():
                op()
    with _one_device():
        assert (scores / torch.tensor(2.0)).device.type == "meta"
        assert scores.masked_fill(cpu_mask.to("meta"), 0.0).shape == (2, 4, 4)


@pytest.mark.unit
def test_a_mask_that_leaks_too_little_to_see_is_named_with_its_fitted_fill():
    """log(mask.clamp(1e-9)) added to the scores keeps a blocked key at a weight of e^-20.7: the
    output is off by about 1e-7, right by MATCH and wrong by the tests. The fitted fill accounts
    for that difference and is named with its value; noise of the same size is not explained."""
    import torch

    from exercise.causal_self_attention import diagnosis, mistakes, reference
    leak = ("mask_fill_not_neg_inf", "additive")
    shapes = diagnosis.PROBE_SHAPES[:2]
    observed = _observed(lambda w, h, p: mistakes.attention(w, h, p.x, p.mask, (leak,),
                                                             value=torch.tensor(-20.7233, dtype=torch.float64)),
                         shapes, dtypes=("float64",))
    assert not [o for o in observed if o.wrong], "MATCH calls the leaking outputs right"
    slightly = [o for o in observed if o.wrong_for_the_tests]
    assert slightly, "the tests call them wrong"
    combo, values = diagnosis._explain_small(slightly)
    assert combo == (leak,) and all(abs(v + 20.7233) < 0.01 for v in values.values()), values
    assert "accounts for that difference" in diagnosis._match_evidence(combo, values, slightly, observed, small=True)
    g = torch.Generator().manual_seed(3)
    noisy = _observed(lambda w, h, p: reference.attention(w, h, p.x, p.mask)
                      + 1e-7 * torch.randn(p.x.shape, generator=g, dtype=torch.float64), shapes, dtypes=("float64",))
    assert diagnosis._explain_small([o for o in noisy if o.wrong_for_the_tests]) is None
