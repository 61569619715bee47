"""Submissions that cannot be graded are rejected with score 0 and a message that says what and where.
Each malformed file's result is the edge corpus's (graded once per run by a warm batch, and in the
Docker sandbox too: tests/test_docker.py); one rejection goes through `grade FILE` for its terminal."""
import pytest

from tests.support.corpus import EDGE
from tests.support.grading import SUBMISSIONS, grade

MALFORMED = SUBMISSIONS / "malformed"

CASES = {
    "syntax_error.py": ["syntax error at line 21", "expected ':'"],
    "syntax_error_notebook.ipynb": ["syntax error at cell 2, line 8"],
    "undecodable.py": ["cannot decode", "utf-8"],
    "empty.py": ["empty"],
    "no_class.py": ["defines no class CausalSelfAttention", "CausalAttention"],
    "not_a_module_class.py": ["is not a class", "int"],
    "wrong_init_signature.py": ["CausalSelfAttention(dim, n_heads)", "__init__(self, dim)", "line 8"],
    "wrong_forward_signature.py": ["forward must accept (x)", "forward(self)", "line 15"],
    "import_fails.py": ["ModuleNotFoundError", "attention_helpers_hw3", "line 3"],
    "raises_at_import.py": ["ZeroDivisionError", "line 9"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_submission_is_rejected_precisely(name):
    result = EDGE[f"malformed/{name}"]
    assert result["status"] == "rejected"
    assert result["score"] == 0 and result["tests"] == []
    for fragment in CASES[name]:
        assert fragment in result["message"], (fragment, result["message"])
    assert "Traceback" not in result["message"]


def test_a_rejection_reads_rejected_on_the_terminal_with_its_reason_and_no_traceback(grade_cached):
    graded = grade_cached(MALFORMED / "no_class.py")  # shared with test_docker's cold comparison
    assert graded.exit_code == 0, graded.terminal     # a result was produced
    assert graded.result["status"] == "rejected"
    assert "REJECTED" in graded.terminal and "defines no class CausalSelfAttention" in graded.terminal
    assert "Traceback" not in graded.terminal


def test_too_large_submission_is_rejected(tmp_path):
    path = tmp_path / "huge.py"
    path.write_text("import torch\n" + "# padding\n" * 60_000)
    graded = grade(path)
    assert graded.result["status"] == "rejected"
    assert "limit is" in graded.result["message"]


def test_a_folder_or_a_missing_file_is_a_command_line_error(tmp_path):
    assert grade(tmp_path).exit_code == 2
    assert grade(tmp_path / "nope.py").exit_code == 2


def test_unknown_option_values_are_command_line_errors(tmp_path):
    path = SUBMISSIONS / "correct" / "einsum.py"
    assert grade(path, "--sandbox", "nowhere").exit_code == 2
    assert grade(path, "--exercise", "nope").exit_code == 2
