"""Every correct style earns full marks through the real CLI, in float32 and float64.

The corpus's styles are graded once, by one `grade batch` run in warm local sandboxes (as an
instructor regrades a class); the examples a student starts from go through `grade FILE`, the cold
path a student's laptop takes.
"""
import pytest

from tests.support.corpus import CORRECT
from tests.support.grading import EXAMPLES, SUBMISSIONS

CORPUS = sorted((SUBMISSIONS / "correct").iterdir())
EXAMPLES_CORRECT = [EXAMPLES / "correct.py", EXAMPLES / "notebook.ipynb"]


def full_marks(result: dict) -> None:
    assert result["status"] == "graded", result["feedback"]
    failed = [(t["id"], t["feedback"]) for t in result["tests"] if t["status"] != "passed"]
    assert failed == []
    assert result["score"] == result["max_score"] == 100
    assert result["bugs"] == []


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_correct_style_scores_full_marks(path):
    full_marks(CORRECT.result(path.name))


@pytest.mark.parametrize("path", EXAMPLES_CORRECT, ids=[p.name for p in EXAMPLES_CORRECT])
def test_correct_example_scores_full_marks_with_grade_file(grade_cached, path):
    graded = grade_cached(path)  # once per run: test_cli_contract and test_docker read it too
    assert graded.exit_code == 0, graded.terminal
    full_marks(graded.result)
