"""Scoring a raw harness report: points come from passed tests, a grader fault voids the score."""
import pytest

import exercise
from grader.result import Status
from grader.scoring import rejection_message, result_from_report
from grader.submission import Submission
from sandbox.source import CellSpan, LineMap

pytestmark = pytest.mark.unit  # the whole module runs in this process (the fast lane)

EX = exercise.get()
SUB = Submission("s.py", "0" * 64, b"import torch\nclass X:\n    pass\n", LineMap())


def entry(status="passed", points=10.0, internal=False, group="g::a"):
    return {"id": f"t::{status}", "group": group, "group_title": "A", "points": points, "status": status,
            "feedback": "why", "internal": internal, "bugs": [], "case": None}


def score(report):
    return result_from_report(report, submission=SUB, exercise=EX, sandbox="local", duration_s=1.0,
                              grader_version="x")


def test_points_come_from_passed_tests_only():
    result = score({"status": "graded", "tests": [entry("passed", 30), entry("failed", 50), entry("timeout", 20)]})
    assert result.status is Status.GRADED and result.score == 30 and result.max_score == 100
    assert [t.score for t in result.tests] == [30, 0, 0]


def test_a_report_that_is_not_the_whole_suite_is_refused():
    import pytest

    from grader.scoring import ReportError
    with pytest.raises(ReportError, match="add up to 50"):
        score({"status": "graded", "tests": [entry("passed", 50)]})


def test_a_grader_fault_in_any_test_records_no_score():
    result = score({"status": "graded", "tests": [entry("passed", 90), entry("error", 10, internal=True)]})
    assert result.status is Status.ERROR and result.score is None
    assert result.to_dict()["score"] is None


def test_rejection_message_maps_notebook_lines_to_cells():
    sub = Submission("n.ipynb", "0", b"import torch\nx = 1\ny = 1 / 0\n", LineMap((CellSpan(1, 1, 1), CellSpan(2, 2, 3))))
    message = rejection_message({"reason": "import_failed", "error": {"type": "ZeroDivisionError",
                                 "message": "division by zero", "line": 3}}, EX, sub)
    assert message == "importing your file raised ZeroDivisionError: division by zero at cell 3, line 2: y = 1 / 0"


def test_groups_sum_their_cases():
    result = score({"status": "graded", "tests": [entry("passed", 5, group="g::a"), entry("failed", 5, group="g::a"),
                                                 entry("passed", 90, group="g::b")]})
    assert [(g.key, g.score, g.max_score) for g in result.groups()] == [("g::a", 5, 10), ("g::b", 90, 90)]


def test_a_bug_that_costs_nothing_is_presented_as_advice():
    bugs = [{"id": "view_without_contiguous", "title": "t", "explanation": "e", "fix": "f", "advice": False,
             "affects": ["b"]},
            {"id": "wrong_scale", "title": "t", "explanation": "e", "fix": "f", "advice": False, "affects": ["a"]}]
    result = score({"status": "graded", "bugs": bugs,
                    "tests": [entry("failed", 40, group="g::a"), entry("passed", 60, group="g::b")]})
    assert {b.id: b.advice for b in result.bugs} == {"view_without_contiguous": True, "wrong_scale": False}


def test_failed_tests_with_nothing_named_get_the_honest_note():
    result = score({"status": "graded", "tests": [entry("failed", 40), entry("passed", 60)]})
    assert "no mistake in the catalog" in result.diagnosis
    assert score({"status": "graded", "tests": [entry("passed", 100)]}).diagnosis == ""
