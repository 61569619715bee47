"""Every correct style earns full marks through the real CLI, in float32 and float64."""
import re

import pytest

from tests.support.grading import EXAMPLES, SUBMISSIONS, grade

CORRECT = sorted((SUBMISSIONS / "correct").iterdir()) + [EXAMPLES / "correct.py", EXAMPLES / "notebook.ipynb"]


@pytest.mark.parametrize("path", CORRECT, ids=[p.name for p in CORRECT])
def test_correct_solution_scores_full_marks(path):
    # A file may say how long a grade of it may take ('# time-limit: 400'): torch.compile's one-off
    # compiles take minutes on a loaded 2-core machine, within an instructor's --time-limit.
    limit = re.search(r"^# time-limit: (\d+)$", path.read_text(errors="replace"), re.M)
    graded = grade(path, *(["--time-limit", limit.group(1)] if limit else []), timeout=600)
    assert graded.exit_code == 0, graded.terminal
    result = graded.result
    assert result["status"] == "graded", result["feedback"]
    failed = [(t["id"], t["feedback"]) for t in result["tests"] if t["status"] != "passed"]
    assert failed == []
    assert result["score"] == result["max_score"] == 100
    assert result["bugs"] == []
