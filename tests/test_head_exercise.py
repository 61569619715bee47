"""The second exercise, `causal-attention-head` (a function, not a module), graded through the real
CLI on its own corpus: every correct style gets full marks and no bug; every buggy file loses points
and is named exactly its own bug; a mistake outside the catalog gets an honest note and
no name; `grade exercises` lists both exercises. The attacks that apply to
a function are in tests/submissions/head/attacks, run by tests/test_attacks.py in both sandboxes.

The corpus is graded once, by one `grade batch` run in warm local sandboxes (as an instructor
regrades a class), and in the Docker sandbox too (tests/test_docker.py); one file goes through `grade FILE`.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from exercise.causal_attention_head import diagnosis, mistakes, reference
from exercise.causal_attention_head.catalog import CATALOG
from tests.support.grading import SUBMISSIONS, grade, grade_once
from tests.support.corpus import HEAD_CORPUS, HEAD_EXERCISE, Corpus

NAME = HEAD_EXERCISE
HEAD = SUBMISSIONS / "head"
CORRECT = sorted((HEAD / "correct").glob("*.py"))
BUGGY = sorted((HEAD / "buggy").glob("*.py"))
UNKNOWN = sorted((HEAD / "unknown").glob("*.py"))   # mistakes outside the catalog


def declared(path) -> set[str]:
    """The bug ids a buggy file's first line declares (`# bug: id`)."""
    return {i.strip() for i in path.read_text().splitlines()[0].removeprefix("# bug:").split(",") if i.strip()}


@pytest.fixture(scope="session")
def head_graded() -> Corpus:
    """Every correct, buggy and outside-the-catalog file of the corpus, graded by warm batches once
    per test run (tests.support.corpus): results by 'folder/name', graded when first asked for."""
    return HEAD_CORPUS


@pytest.mark.unit
def test_the_corpus_covers_the_catalog():
    assert len(CORRECT) >= 8
    counts = {bug_id: sum(bug_id in declared(p) for p in BUGGY) for bug_id in CATALOG}
    assert {k: v for k, v in counts.items() if v < 2} == {}
    assert all(declared(p) <= set(CATALOG) and p.name.split("__")[0] in declared(p) for p in BUGGY)


@pytest.mark.parametrize("path", CORRECT, ids=[p.name for p in CORRECT])
def test_correct_style_gets_full_marks(head_graded, path):
    result = head_graded[f"correct/{path.name}"]
    assert result["exercise"] == NAME and result["status"] == "graded", result.get("message")
    assert result["score"] == result["max_score"] == 100, [t["feedback"] for t in result["tests"] if t["feedback"]][:2]
    assert result["bugs"] == []


@pytest.mark.parametrize("path", BUGGY, ids=[p.name for p in BUGGY])
def test_mistake_loses_points_and_is_named_exactly(head_graded, path):
    result = head_graded[f"buggy/{path.name}"]
    assert result["status"] == "graded", result.get("message")
    assert 0 <= result["score"] < 100
    assert {b["id"] for b in result["bugs"]} == declared(path), result["diagnosis"]
    for bug in result["bugs"]:
        assert bug["title"] and bug["explanation"] and bug["fix"] and bug["evidence"] and not bug["advice"]
        # the bug is on the failed tests whose points it costs
        assert any(bug["id"] in t["bugs"] for t in result["tests"] if t["status"] != "passed")


@pytest.mark.parametrize("path", UNKNOWN, ids=[p.name for p in UNKNOWN])
def test_mistake_outside_the_catalog_gets_the_note_and_no_name(head_graded, path):
    result = head_graded[f"unknown/{path.name}"]
    assert result["status"] == "graded" and result["score"] < 100
    assert result["bugs"] == []
    assert "no mistake in the catalog" in result["diagnosis"]


def test_grade_exercises_lists_both():
    proc = subprocess.run([sys.executable, "-m", "grader", "exercises"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    names = {line.split("\t")[0] for line in proc.stdout.splitlines()}
    assert {"causal-self-attention", NAME} <= names


def _one_file_graded(sandbox: str):
    graded = grade_once(HEAD / "buggy" / "mask_after_softmax__masked_fill_zero.py", "--exercise", NAME, "--sandbox", sandbox)
    assert graded.exit_code == 0 and graded.result["status"] == "graded", graded.terminal[-2000:]
    assert graded.result["exercise"] == NAME and graded.result["environment"]["sandbox"] == sandbox
    top = graded.terminal.split("Test group")[0]
    assert "Bug: The causal mask is applied after the softmax" in top and "Fix:" in top
    # feedback in got / expected form, on the weights the student returned
    weights = next(t for t in graded.result["tests"] if "test_weights_match_the_reference" in t["group"])
    assert "got      weights[" in weights["feedback"] and "expected weights[" in weights["feedback"]
    assert graded.full("test_returns_out_and_weights") and graded.full("test_weights_are_zero_above")
    assert graded.lost("test_weight_rows_sum_to_one") and graded.lost("test_autograd_sees_no_future")
    return graded.result["score"]


def test_grade_file_names_the_bug_with_got_and_expected():
    assert _one_file_graded("local") < 100


@pytest.mark.docker
def test_grade_file_in_docker_gives_the_same_grade():
    assert _one_file_graded("docker") == _one_file_graded("local")


def test_a_function_that_is_not_there_is_rejected_with_the_function_named(tmp_path):
    path = tmp_path / "submit.py"
    path.write_text("import torch\n\ndef attention(q, k, v):\n    return q, q\n")
    graded = grade(path, "--exercise", NAME)
    assert graded.exit_code == 0 and graded.result["status"] == "rejected" and graded.result["score"] == 0
    assert "causal_attention" in graded.result["message"]


# -- the diagnosis's models, in this process (fast) ------------------------------------------------
def _probe_inputs():
    return [reference.random_qkv(B, T, d, seed=900 + i) for i, (B, T, d) in enumerate(diagnosis.PROBES)]


@pytest.mark.unit
def test_the_hand_written_reference_is_sdpa():
    for qkv in _probe_inputs():
        assert diagnosis._same(mistakes.attention(*qkv), reference.attention(*qkv))


@pytest.mark.unit
def test_every_mistake_model_is_wrong_and_tells_itself_apart_on_the_probes():
    """So that a match names one mistake: no model equals the correct answers or another bug's."""
    inputs = _probe_inputs()
    models = {m: [mistakes.attention(*x, m) for x in inputs] for m in mistakes.SINGLES}
    models[("wrong_scale", "factor")] = [mistakes.attention(*x, ("wrong_scale", "factor"), 1.0) for x in inputs]
    models[("mask_fill_not_neg_inf", "value")] = [mistakes.attention(*x, ("mask_fill_not_neg_inf", "value"), -3.0)
                                                  for x in inputs]
    correct = [reference.attention(*x) for x in inputs]
    for m, answers in models.items():
        assert not all(diagnosis._same(a, c) for a, c in zip(answers, correct)), m
        for other, theirs in models.items():
            if other[0] != m[0]:
                assert not all(diagnosis._same(a, b) for a, b in zip(answers, theirs)), (m, other)


@pytest.mark.unit
@pytest.mark.parametrize("factor,name", [(1.0, "none"), ("1/d", "head_dim_not_sqrt"), ("sqrt", "multiplied"),
                                         (0.7, "constant")])
def test_a_scale_is_read_off_the_weights_and_named(factor, name):
    inputs = _probe_inputs()
    values = {}
    for i, ((q, k, v), (_, _, d)) in enumerate(zip(inputs, diagnosis.PROBES)):
        c = {"1/d": 1 / d, "sqrt": d ** 0.5}.get(factor, factor)
        answer = mistakes.attention(q, k, v, ("wrong_scale", "factor"), c)
        values[i] = diagnosis._fit(("wrong_scale", "factor"), (q, k, v), answer)
        assert values[i][0] == pytest.approx(c, rel=1e-9) and values[i][1] == pytest.approx(1.0)
    assert diagnosis._variant("wrong_scale", "factor", values) == name


class _Answers:
    """A stand-in for the worker's student: `function()` answers calls with a plain Python function
    (the diagnosis's own logic is what these tests watch; the corpus goes through the real sandbox)."""

    def __init__(self, fn):
        self.fn = fn

    def function(self):
        return self

    def map(self, calls):
        return [self.fn(*args) for args in calls]


def _diagnosed(fn) -> diagnosis.Diagnosis:
    found = diagnosis.Diagnosis()
    diagnosis._answers(_Answers(fn), found)
    return found


def _masked(q, k, scale, allowed_offset=0):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) * scale
    return scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(allowed_offset), float("-inf"))


@pytest.mark.unit
def test_a_mistake_taken_only_past_some_length_is_named_where_it_shows():
    """No mask only past T = 32: wrong at the one long probe, right at the others (where the
    no-mask model would differ too); named, with where it shows, and never at the right probes."""
    def fast_path(q, k, v):
        scale = q.shape[-1] ** -0.5
        scores = q @ k.transpose(-2, -1) * scale if q.shape[1] > 32 else _masked(q, k, scale)
        w = scores.softmax(-1)
        return w @ v, w
    found = _diagnosed(fast_path)
    assert found.ids() == {"no_causal_mask"}, found.unexplained
    assert "it shows only where T > 12" in found.findings[0]["evidence"]


@pytest.mark.unit
def test_a_branch_on_the_batch_size_is_named_and_a_right_answer_names_nothing():
    def batched(q, k, v):
        w = _masked(q, k, q.shape[-1] ** -0.5).softmax(-1)
        if q.shape[0] > 1:
            w = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1).masked_fill(w == 0, 0.0)
        return w @ v, w
    found = _diagnosed(batched)
    assert found.ids() == {"mask_after_softmax"} and "B > 1" in found.findings[0]["evidence"]
    assert _diagnosed(lambda q, k, v: reference.attention(q, k, v)).findings == []


@pytest.mark.unit
def test_a_row_loop_over_the_keys_before_t_is_the_excludes_self_off_by_one():
    def keys_before(q, k, v):
        w = _masked(q, k, q.shape[-1] ** -0.5, -1).softmax(-1).nan_to_num(nan=0.0)   # row 0: empty softmax
        return w @ v, w
    found = _diagnosed(keys_before)
    assert found.ids() == {"causal_mask_off_by_one"} and found.findings[0]["variant"] == "excludes_self_empty_row"


@pytest.mark.unit
def test_unscaled_weights_with_the_output_divided_are_fitted_apart():
    def output_divided(q, k, v):
        w = _masked(q, k, 1.0).softmax(-1)
        return w @ v / q.shape[-1] ** 0.5, w
    found = _diagnosed(output_divided)
    assert found.ids() == {"wrong_scale"} and found.findings[0]["variant"] == "none"
    assert "out is weights @ v multiplied by 0.5 at d_k=4" in found.findings[0]["evidence"]
    # right weights with a scaled output: the scores are not what is wrong, so no scale is named
    found = _diagnosed(lambda q, k, v: (reference.attention(q, k, v)[0] * 0.5, reference.attention(q, k, v)[1]))
    assert found.findings == [] and "no mistake in the catalog" in found.unexplained


@pytest.mark.unit
def test_masked_scores_times_the_lower_triangle_is_nan_from_the_mask():
    def times_tril(q, k, v):
        T = q.shape[1]
        tril = torch.ones(T, T, dtype=q.dtype).tril()
        w = (_masked(q, k, q.shape[-1] ** -0.5) * tril).softmax(-1)
        return w @ v, w
    assert _diagnosed(times_tril).ids() == {"nan_from_inf_mask"}
    # scores divided by the triangle: +-inf by the sign of the score, a pattern no catalog mistake makes
    def over_tril(q, k, v):
        T = q.shape[1]
        w = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5 / torch.ones(T, T, dtype=q.dtype).tril()).softmax(-1)
        return w @ v, w
    found = _diagnosed(over_tril)
    assert found.findings == [] and "no mistake in the catalog" in found.unexplained


class _Autograd(_Answers):
    """The stand-in with the worker's vector-Jacobian product: the input `wrt` a fresh leaf that
    requires grad, an exception in the student's code raised as the worker's StudentCodeError."""

    def changed_inputs(self, *args):   # as the worker: a copy from before, compared after one call
        before = [a.clone() for a in args]
        self.fn(*args)
        return [i for i, (a, b) in enumerate(zip(args, before)) if not torch.equal(a, b)]

    def vjp(self, *args, cotangents, wrt, output):
        from sandbox.failures import StudentCodeError
        args = list(args)
        args[wrt] = args[wrt].clone().requires_grad_(True)
        try:
            out = self.fn(*args)[output]
            return torch.stack([torch.autograd.grad(out, args[wrt], grad_outputs=c)[0] for c in cotangents])
        except Exception as err:   # what the worker sends back: type and message, never matched here
            raise StudentCodeError("vjp", {"type": type(err).__name__, "message": str(err)}, None) from err


def _autograd_diagnosed(fn) -> diagnosis.Diagnosis:
    found = diagnosis.Diagnosis()
    diagnosis._autograd(_Autograd(fn), found)
    return found


@pytest.mark.unit
def test_a_backward_that_raises_is_named_by_what_happened_not_by_its_words():
    def inplace_on_query(q, k, v):
        q.div_(q.shape[-1] ** 0.5)                       # the caller's tensor, in place
        w = _masked(q, k, 1.0).softmax(-1)
        return w @ v, w
    found = _autograd_diagnosed(inplace_on_query)
    assert found.ids() == {"breaks_autograd"} and found.findings[0]["variant"] == "inplace_on_input"
    evidence = found.findings[0]["evidence"]
    assert evidence.startswith("your function changes its input q in place")
    assert "with respect to q fails (with respect to k and v it works): it raised RuntimeError" in evidence

    def raises_in_its_own_words(q, k, v):               # a message no list of texts could know
        if q.requires_grad or k.requires_grad or v.requires_grad:
            raise RuntimeError("zut alors")
        return reference.attention(q, k, v)
    found = _autograd_diagnosed(raises_in_its_own_words)
    assert found.ids() == {"breaks_autograd"} and found.findings[0]["variant"] == "backward_fails"


@pytest.mark.unit
def test_a_cut_graph_is_named_and_a_working_backward_is_not():
    def no_grad(q, k, v):
        with torch.no_grad():
            out, w = reference.attention(q, k, v)
        return out + 0 * (q + k + v), w                  # zero gradients, not an exception
    found = _autograd_diagnosed(no_grad)
    assert found.ids() == {"breaks_autograd"} and found.findings[0]["variant"] == "detached"

    def by_hand(q, k, v):
        w = _masked(q, k, q.shape[-1] ** -0.5).softmax(-1)
        return w @ v, w
    assert _autograd_diagnosed(by_hand).findings == []
    # an output that ignores v has no gradient to give for it: not a cut graph
    assert _autograd_diagnosed(lambda q, k, v: by_hand(q, k, q)).findings == []


@pytest.mark.unit
def test_a_fitted_mistake_that_shows_at_some_shapes_is_fitted_only_there():
    """An integer square root for the scale: right where d_k is a square (4, 9, 16), wrong at 6 and 3,
    where the factor is read off (1/2 and 1); the probes where it is right have no value to check."""
    def integer_sqrt(q, k, v):
        w = _masked(q, k, 1 / int(q.shape[-1] ** 0.5)).softmax(-1)
        return w @ v, w
    found = _diagnosed(integer_sqrt)
    assert found.ids() == {"wrong_scale"} and not found.skipped, found.unexplained
    evidence = found.findings[0]["evidence"]
    assert "0.5 at d_k=6" in evidence and "1 at d_k=3" in evidence and "d_k=4" not in evidence.split("; e.g.")[0]
    assert "your answers are right" in evidence


def test_an_input_changed_in_place_is_seen_by_the_real_worker(head_graded):
    """The worker compares the input after the call (sandbox/worker.py op_changed_inputs): q.div_()
    on the caller's q is said to be the cause; a NumPy round trip changes no input."""
    bug, = head_graded["buggy/breaks_autograd__inplace_div_on_query.py"]["bugs"]
    assert bug["variant"] == "inplace_on_input" and "changes its input q in place" in bug["evidence"]
    bug, = head_graded["buggy/breaks_autograd__numpy_round_trip.py"]["bugs"]
    assert bug["variant"] == "backward_fails" and "in place" not in bug["evidence"]
