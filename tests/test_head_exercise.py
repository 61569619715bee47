"""The second exercise, `causal-attention-head` (a function, not a module), graded through the real
CLI on its own corpus: every correct style gets full marks and no bug; every buggy file loses points
and is named exactly its own bug; a mistake outside the catalog gets an honest note and
no name; `grade exercises` lists both exercises. The attacks that apply to
a function are in tests/submissions/head/attacks, run by tests/test_attacks.py in both sandboxes.

The corpus is graded once, by one `grade batch` run in warm local sandboxes (as an instructor
regrades a class); one file goes through `grade FILE` and the Docker sandbox too.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from exercise.causal_attention_head import diagnosis, mistakes, reference
from exercise.causal_attention_head.catalog import CATALOG
from tests.conftest import SUBMISSIONS, grade

NAME = "causal-attention-head"
HEAD = SUBMISSIONS / "head"
CORRECT = sorted((HEAD / "correct").glob("*.py"))
BUGGY = sorted((HEAD / "buggy").glob("*.py"))
UNKNOWN = sorted((HEAD / "unknown").glob("*.py"))   # mistakes outside the catalog


def declared(path) -> set[str]:
    """The bug ids a buggy file's first line declares (`# bug: id`)."""
    return {i.strip() for i in path.read_text().splitlines()[0].removeprefix("# bug:").split(",") if i.strip()}


@pytest.fixture(scope="module")
def head_graded(tmp_path_factory) -> dict[str, dict]:
    """Every correct, buggy and outside-the-catalog file of the corpus, graded by one `grade batch` run: results by
    'folder/name'."""
    root = tmp_path_factory.mktemp("head-corpus")
    (root / "class").mkdir()
    for path in CORRECT + BUGGY + UNKNOWN:
        (root / "class" / f"{path.parent.name}__{path.name}").write_bytes(path.read_bytes())
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(root / "class"), "--exercise", NAME,
                           "--out", str(root / "out"), "--jobs", "2"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {}
    for result_file in (root / "out" / "results").glob("*.json"):
        result = json.loads(result_file.read_text())
        results[result["submission"]["name"].replace("__", "/", 1)] = result
    assert len(results) == len(CORRECT) + len(BUGGY) + len(UNKNOWN)
    return results


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
    graded = grade(HEAD / "buggy" / "mask_after_softmax__masked_fill_zero.py", "--exercise", NAME, "--sandbox", sandbox)
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


def test_the_hand_written_reference_is_sdpa():
    for qkv in _probe_inputs():
        assert diagnosis._same(mistakes.attention(*qkv), reference.attention(*qkv))


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


@pytest.mark.parametrize("factor,name", [(1.0, "none"), ("1/d", "head_dim_not_sqrt"), ("sqrt", "multiplied"),
                                         (0.7, "constant")])
def test_a_scale_is_read_off_the_weights_and_named(factor, name):
    inputs = _probe_inputs()
    values = []
    for (q, k, v), (_, _, d) in zip(inputs, diagnosis.PROBES):
        c = {"1/d": 1 / d, "sqrt": d ** 0.5}.get(factor, factor)
        _, weights = mistakes.attention(q, k, v, ("wrong_scale", "factor"), c)
        values.append(diagnosis._fit(("wrong_scale", "factor"), (q, k, v), weights))
        assert values[-1] == pytest.approx(c, rel=1e-9)
    assert diagnosis._variant("wrong_scale", "factor", values) == name
    assert torch.isfinite(torch.tensor(values)).all()
