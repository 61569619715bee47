"""Result records built by hand, for the tests of what reads them."""
from __future__ import annotations

import dataclasses

from grader import render
from grader import result as results_mod


def result_with_hidden_test() -> results_mod.GradeResult:
    bug = results_mod.Bug(id="wrong_scale", title="Scores scaled wrongly", explanation="e", fix="f",
              affects=("test_hidden",))
    tests = (
        results_mod.TestResult(id="a", name="Shape", group="test_01::test_shape", group_title="Shape",
                   status=results_mod.TestStatus.PASSED, score=40, max_score=40),
        results_mod.TestResult(id="b", name="Values", group="test_02::test_hidden", group_title="Values",
                   status=results_mod.TestStatus.FAILED, score=0, max_score=60, feedback="got 1 expected 2",
                   bugs=("wrong_scale",), visibility=results_mod.Visibility.AFTER_DUE_DATE),
    )
    result = results_mod.GradeResult(exercise="causal-self-attention", submission_name="s.py", submission_sha256="0",
                         status=results_mod.Status.GRADED, score=40, max_score=100, tests=tests, bugs=(bug,))
    return dataclasses.replace(result, feedback=render.plain_text(result))
