"""Code that exits, hangs or floods its output still gets a result, within the time limit, and only
the tests it broke fail. What this grade does not cover (attacks on the score) is the attack suite's."""
from tests.conftest import SUBMISSIONS, grade

HOSTILE = SUBMISSIONS / "hostile"


def _statuses(result):
    return {t["status"] for t in result["tests"]}


def test_exit_in_forward_fails_only_the_calls_and_says_why():
    graded = grade(HOSTILE / "exit_in_forward.py")
    result = graded.result
    assert result["status"] == "graded"
    assert result["score"] <= 5                       # only the layer check needs no forward
    forward_tests = [t for t in result["tests"] if t["status"] != "passed"]
    assert forward_tests and all("exit code 0" in t["feedback"] for t in forward_tests)


def test_system_exit_and_keyboard_interrupt_in_forward_are_errors_of_that_test():
    for name, raised in (("system_exit_in_forward.py", "SystemExit"),
                         ("keyboard_interrupt_in_forward.py", "KeyboardInterrupt")):
        result = grade(HOSTILE / name).result
        assert result["status"] == "graded"
        assert result["score"] <= 5
        errors = [t for t in result["tests"] if t["status"] == "error"]
        assert errors and all(raised in t["feedback"] for t in errors), name


def test_endless_loop_in_forward_times_out_within_the_limit():
    graded = grade(HOSTILE / "loop_in_forward.py", "--time-limit", "40")
    result = graded.result
    assert graded.exit_code == 0 and result["status"] == "graded"
    assert graded.seconds < 40
    assert "timeout" in _statuses(result)
    assert any("did not finish within" in t["feedback"] for t in result["tests"])
    assert result["score"] <= 5


def test_endless_loop_at_import_is_rejected_within_the_limit():
    graded = grade(HOSTILE / "loop_at_import.py", "--time-limit", "30")
    assert graded.seconds < 30
    assert graded.result["status"] == "rejected"
    assert "did not finish within" in graded.result["message"]


def test_exit_at_import_is_rejected_with_the_line():
    result = grade(HOSTILE / "exit_at_import.py").result
    assert result["status"] == "rejected"
    assert "SystemExit" in result["message"] and "line 35" in result["message"]


def test_output_flood_kills_the_worker_and_says_so():
    graded = grade(HOSTILE / "print_flood.py")
    result = graded.result
    assert result["status"] == "graded" and result["score"] <= 5
    assert any("printed more than" in t["feedback"] for t in result["tests"])
    assert len(graded.terminal) < 100_000
