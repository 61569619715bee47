"""Code that exits, hangs or floods its output still gets a result, within the time limit, and only
the tests it broke fail. What this grade does not cover (attacks on the score) is the attack suite's.
Most results are the edge corpus's (graded once per run by a warm batch with the host's call and
import limits at 1 s and 2 s, and in the Docker sandbox too: tests/test_docker.py); what only a
cold grade shows (its terminal) goes through `grade FILE`."""
from tests.support.corpus import EDGE
from tests.support.grading import SUBMISSIONS, grade

HOSTILE = SUBMISSIONS / "hostile"


def _statuses(result):
    return {t["status"] for t in result["tests"]}


def test_exit_in_forward_fails_only_the_calls_and_says_why(grade_cached):
    graded = grade_cached(HOSTILE / "exit_in_forward.py")  # shared with test_docker's comparison
    result = graded.result
    assert result["status"] == "graded"
    assert result["score"] <= 5                       # only the layer check needs no forward
    forward_tests = [t for t in result["tests"] if t["status"] != "passed"]
    assert forward_tests and all("exit code 0" in t["feedback"] for t in forward_tests)


def test_system_exit_and_keyboard_interrupt_in_forward_are_errors_of_that_test():
    for name, raised in (("system_exit_in_forward.py", "SystemExit"),
                         ("keyboard_interrupt_in_forward.py", "KeyboardInterrupt")):
        result = EDGE[f"hostile/{name}"]
        assert result["status"] == "graded"
        assert result["score"] <= 5
        errors = [t for t in result["tests"] if t["status"] == "error"]
        assert errors and all(raised in t["feedback"] for t in errors), name


def test_endless_loop_in_forward_times_out_within_the_limit():
    """Graded with the host's call limit of 1 s (grader.grading.CALL_LIMIT): the kill, the count of
    timed-out calls and the rest failed without running are what a loop meets at the deployed 4 s
    (test_pure checks that value), with a core spinning a quarter as long."""
    result = EDGE["hostile/loop_in_forward.py"]
    assert result["status"] == "graded"
    assert result["duration_s"] < 40
    assert "timeout" in _statuses(result)
    assert any("did not finish within 1 s" in t["feedback"] for t in result["tests"])
    assert result["score"] <= 5


def test_endless_loop_at_import_is_rejected_within_the_limit():
    """Graded with the host's import limit of 2 s (grader.grading.IMPORT_LIMIT): the kill and the
    rejection are what a loop meets at the deployed 20 s (test_pure checks that value), in a tenth
    of the time a core spins."""
    result = EDGE["hostile/loop_at_import.py"]
    assert result["duration_s"] < 30
    assert result["status"] == "rejected"
    assert "did not finish within 2 s" in result["message"], result["message"]


def test_exit_at_import_is_rejected_with_the_line():
    result = EDGE["hostile/exit_at_import.py"]
    assert result["status"] == "rejected"
    assert "SystemExit" in result["message"] and "line 35" in result["message"]


def test_output_flood_kills_the_worker_and_says_so():
    graded = grade(HOSTILE / "print_flood.py")
    result = graded.result
    assert result["status"] == "graded" and result["score"] <= 5
    assert any("printed more than" in t["feedback"] for t in result["tests"])
    assert len(graded.terminal) < 100_000


def test_endless_loop_beside_torch_compile_is_still_a_prompt_timeout():
    """torch.compile in a module changes nothing about the per-call limit: a forward that loops
    still times out after it, and is called a loop. Graded with the host's call limit of 1 s
    (grader.grading.CALL_LIMIT), as the test above."""
    result = EDGE["hostile/loop_in_compiled_module.py"]
    assert result["status"] == "graded"
    assert result["duration_s"] < 30, "three timed-out calls of 1 s and the rest not run: far below the 90 s limit"
    timeouts = [t for t in result["tests"] if t["status"] == "timeout"]
    assert timeouts and any("did not finish within 1 s (an infinite loop?)" in t["feedback"] for t in timeouts)
    assert not any("compiling" in t["feedback"] for t in result["tests"])
    assert result["score"] <= 5


def test_a_source_that_blew_up_the_old_check_is_graded_in_time():
    """10 000 definitions of one name made the old forbidden built-in scan grow with their square
    until the harness ran out of memory or time; the scan is linear now: the grade is a graded
    result, in time, and the comparison tests ran (the file is otherwise an honest correct layer)."""
    graded = grade(SUBMISSIONS / "attacks" / "many_definitions_of_one_name.py")
    result = graded.result
    assert graded.exit_code == 0 and result["status"] == "graded", graded.terminal[-2000:]
    compared = [t for t in result["tests"] if "matches_multihead_attention" in t["id"]]
    assert compared and all(t["status"] == "passed" for t in compared), [t["feedback"][:200] for t in compared]
    assert graded.seconds < 60
