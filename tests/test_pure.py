"""The host's pure modules, in this process: a course file read and checked, the term's arithmetic,
names and cells made safe to show, clusters, grading keys and seeds, and a batch's plan of what to
grade. Each test here is of what an instructor or a platform sees when the module is wrong: a line
number, a penalty, a cell a spreadsheet would run, a regrade that is not reproduced."""
from __future__ import annotations

import dataclasses
import datetime
import os
from pathlib import Path

import pytest

import exercise as exercises
from grader import batch, clusters, course, keys, term, text
from grader.course import CourseError, LatePolicy

pytestmark = pytest.mark.unit

EX = exercises.get("causal-self-attention")
UTC = datetime.UTC


def course_file(tmp_path: Path, body: str) -> course.Course:
    path = tmp_path / "course.toml"
    path.write_text(body)
    return course.load(path, EX)


# --- the course file ----------------------------------------------------------------------------------

def test_a_course_changes_points_visibility_and_full_marks(tmp_path):
    groups = course.test_groups(EX)
    name = "test_parameter_count"
    assert name in groups, groups
    default = course.Course(name="-", sha256="-").max_score(EX)
    assert default == 100
    c = course_file(tmp_path, f'time_limit_s = 120\n[groups.{name}]\npoints = {groups[name].points + 5}\n'
                              f'visibility = "after_due_date"\n')
    assert c.time_limit_s == 120 and c.visibility == {name: "after_due_date"}
    assert c.max_score(EX) == 105


@pytest.mark.parametrize(("body", "line", "says"), [
    ('time_limit_s = 60\nlimit = 3\n', 2, "limit"),
    ('\n\n[groups.test_no_such_group]\npoints = 3\n', 3, "test groups"),
    ('[groups.test_parameter_count]\npoints = -1\n', 2, "points"),
    ('time_limit_s = 0.1\n', 1, "time_limit_s"),
    ('[groups.test_parameter_count]\nvisibility = "later"\n', 2, "visibility"),
    ('[clusters.c0123456789]\ntitle = "t"\n', 1, "fix"),
    ('[late]\ndue = 2026-12-01T23:59:00+01:00\nper_day = 200\n', 3, "per_day"),
])
def test_a_course_file_error_names_its_line_and_key(tmp_path, body, line, says):
    with pytest.raises(CourseError) as raised:
        course_file(tmp_path, body)
    message = str(raised.value)
    assert f"course.toml line {line}:" in message and says in message, message


def test_a_course_that_is_not_toml_or_gives_no_points_is_refused(tmp_path):
    with pytest.raises(CourseError, match="not valid TOML"):
        course_file(tmp_path, "points = = 3\n")
    every = "".join(f"[groups.{g}]\npoints = 0\n" for g in course.test_groups(EX))
    with pytest.raises(CourseError, match="add up to 0"):
        course_file(tmp_path, every)


def test_the_score_key_follows_what_changes_a_score_and_not_the_time_limit(tmp_path):
    a = course_file(tmp_path, "time_limit_s = 60\n")
    b = course_file(tmp_path, "time_limit_s = 90\n")
    c = course_file(tmp_path, "[groups.test_parameter_count]\npoints = 3\n")
    assert a.score_key() != b.score_key()          # the file's hash differs
    assert a.points == b.points == {} and c.points == {"test_parameter_count": 3.0}
    assert keys.score_fingerprint("run", a) != keys.score_fingerprint("run", c)
    assert keys.score_fingerprint("run", None) == keys.score_fingerprint("run", None)


def test_the_time_limit_is_the_one_given_else_the_courses_else_the_exercises(tmp_path):
    head = exercises.get("causal-attention-head")
    assert course.time_limit("causal-self-attention") == EX.limits.wall_s
    assert course.time_limit(head) == head.limits.wall_s != EX.limits.wall_s
    with_limit = course_file(tmp_path, "time_limit_s = 120\n")
    assert course.time_limit(EX, None, with_limit) == 120
    assert course.time_limit(EX, 30, with_limit) == 30
    assert course.time_limit(EX, None, course.Course(name="-", sha256="-")) == EX.limits.wall_s
    # the run key follows the effective limit, however it was given
    run = keys.run_fingerprint("causal-self-attention", "local", None)
    assert run == keys.run_fingerprint("causal-self-attention", "local", EX.limits.wall_s)
    assert run != keys.run_fingerprint("causal-self-attention", "local", 120)



def test_full_marks_are_the_courses_points_else_the_exercises(tmp_path):
    assert course.full_marks("causal-self-attention") == EX.max_score == 100
    reweighted = course_file(tmp_path, "[groups.test_matches_multihead_attention]\npoints = 60\n")
    assert course.full_marks(EX, reweighted) == 130
    assert course.full_marks("causal-self-attention", reweighted) == 130

# --- the term -----------------------------------------------------------------------------------------

DUE = datetime.datetime(2026, 12, 1, 23, 59, tzinfo=UTC)
POLICY = LatePolicy(due=DUE, per_day=10, cap=30, grace_s=15 * 60)


@pytest.mark.parametrize(("late_by", "days", "penalty"), [
    (datetime.timedelta(minutes=-5), 0, 0),          # early
    (datetime.timedelta(minutes=14), 0, 0),          # within the grace
    (datetime.timedelta(minutes=16), 1, 8),          # a part of a day counts as a day: 10% of 80
    (datetime.timedelta(days=2, hours=1), 3, 24),
    (datetime.timedelta(days=9), 9, 24),             # capped at 30% of 80, never more than the raw score
])
def test_a_late_submission_loses_a_share_per_day_up_to_the_cap(late_by, days, penalty):
    s = term.standing(30, 80, submitted=DUE + late_by, late=POLICY, adjustment=None)
    assert (s.late_days, s.penalty) == (days, min(penalty, 30))
    assert s.final == 30 - min(penalty, 30)


def test_an_extension_moves_the_due_date_and_an_adjustment_is_added_after_the_penalty():
    adj = term.Adjustment("alice.py", points=-5, note="copied a cell", extension_days=2)
    s = term.standing(70, 80, submitted=DUE + datetime.timedelta(days=2, hours=3), late=POLICY, adjustment=adj)
    assert (s.late_days, s.penalty, s.final) == (1, 8, 57)
    assert any("Extension: 2 day(s)." == line for line in s.lines())
    assert s.lines()[-1] == "Final score: 57 / 80 (the grader's 70)."
    assert term.standing(None, 80, submitted=DUE, late=POLICY, adjustment=adj).final is None


def test_an_adjustments_file_names_students_of_this_class_only(tmp_path):
    path = tmp_path / "adjust.toml"
    path.write_text('["alice.py"]\npoints = 3\nnote = "  regraded \\n by hand "\n')
    got = term.load_adjustments(path, ["alice.py", "bob.py"])
    assert got.by_student["alice.py"] == term.Adjustment("alice.py", 3.0, "regraded by hand", 0.0)
    path.write_text('["alice.py"]\npoints = 3\n\n["carol.py"]\npoints = 1\n')
    with pytest.raises(term.AdjustmentsError, match=r"adjust.toml line 4: .*carol.py.*alice.py, bob.py"):
        term.load_adjustments(path, ["alice.py", "bob.py"])
    path.write_text('["alice.py"]\nbonus = 3\n')
    with pytest.raises(term.AdjustmentsError, match="unknown key 'bonus'"):
        term.load_adjustments(path, ["alice.py"])


# --- text a screen or a spreadsheet shows ---------------------------------------------------------------

def test_control_and_invisible_characters_are_shown_escaped():
    shown = text.safe("ok\x1b[2Jcleared\u202eevil\u200b")
    assert "\x1b" not in shown and "\u202e" not in shown and "\u200b" not in shown
    assert "ok" in shown and "cleared" in shown and "evil" in shown
    assert "\n" not in text.safe("a\nb", one_line=True)


@pytest.mark.parametrize(("cell", "safe"), [
    ("=1+1", "'=1+1"), ("+SUM(A1)", "'+SUM(A1)"), ("-2", "'-2"), ("@cmd", "'@cmd"),
    ("x;=1+1;.py", "x;'=1+1;.py"), ("alice.py", "alice.py"), ("a-b.py", "a-b.py"),
])
def test_a_cell_no_spreadsheet_runs_as_a_formula(cell, safe):
    assert text.spreadsheet_safe(cell) == safe


def test_names_that_read_the_same_are_told_apart():
    latin, cyrillic = "alice.py", "\u0430lice.py"       # a Cyrillic a
    shown = text.names([latin, cyrillic, "bob.py"])
    assert shown[latin] != shown[cyrillic] and shown["bob.py"] == "bob.py"


# --- clusters --------------------------------------------------------------------------------------------

def signature(failing: list[str], note: str = "", bugs: list[dict] | None = None,
              failed_as: str = "failed") -> str:
    from grader.result import Bug, TestResult, TestStatus
    tests = [TestResult(id=t, name=t, group="g", group_title="g", status=TestStatus(failed_as), score=0.0,
                        max_score=1.0) for t in failing]
    tests.append(TestResult(id="ok", name="ok", group="g", group_title="g", status=TestStatus.PASSED,
                            score=1.0, max_score=1.0))
    return clusters.signature(tests, [Bug(id=b["id"], title="", explanation="", fix="", advice=b.get("advice", False))
                                      for b in bugs or ()], note)


def test_a_cluster_is_the_behaviour_not_the_order_or_the_advice():
    one = signature(["a", "b"], "differs at padded rows")
    assert one == signature(["b", "a"], "differs at padded rows")
    assert one != signature(["a"], "differs at padded rows")
    assert one != signature(["a", "b"], "differs elsewhere")
    assert one == signature(["a", "b"], "differs at padded rows", [{"id": "x", "advice": True}])
    assert one == signature(["a", "b"], "differs at padded rows", failed_as="error")  # any way of not passing
    assert signature(["a"], bugs=[{"id": "wrong_scale"}]) == ""   # a named mistake
    assert signature([]) == ""                                    # full marks
    # The id a course file names stays its members' id across versions (computed with the ids'
    # first definition, from the raw report's dicts).
    assert signature(["test_04::y", "test_03::x[a]"], "only padded query positions differ",
                     [{"id": "mask_device_mismatch", "advice": True}]) == "c9e7b6fae4f"
    assert one.startswith("c") and len(one) == 11


# --- keys and seeds --------------------------------------------------------------------------------------

def test_the_grading_key_follows_the_bytes_the_setting_and_the_rejection():
    run = keys.run_fingerprint("causal-self-attention", "local", None)
    assert run == keys.run_fingerprint("causal-self-attention", "local", EX.limits.wall_s)   # the default is one run
    assert run != keys.run_fingerprint("causal-self-attention", "docker", None)
    assert run != keys.run_fingerprint("causal-self-attention", "local", 61.5)
    base = keys.grading_key(b"x = 1\n", run)
    assert base == keys.grading_key(b"x = 1\n", run)
    assert len({base, keys.grading_key(b"x = 2\n", run), keys.grading_key(b"x = 1\n", run, "rejected"),
                keys.grading_key(b"x = 1\n", keys.score_fingerprint(run))}) == 4


def test_a_grade_seed_is_kept_by_the_host_and_follows_the_bytes(monkeypatch, tmp_path):
    monkeypatch.delenv(keys.SEED_KEY_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    first = keys.grade_seed(b"x = 1\n", "causal-self-attention")
    path = keys.seed_key_file()
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
    assert keys.grade_seed(b"x = 1\n", "causal-self-attention") == first         # a regrade draws the same
    assert keys.grade_seed(b"x = 2\n", "causal-self-attention") != first
    assert keys.grade_seed(b"x = 1\n", "causal-attention-head") != first
    monkeypatch.setenv(keys.SEED_KEY_ENV, "the workers' shared key")
    assert keys.grade_seed(b"x = 1\n", "causal-self-attention") != first


# --- a batch's plan ------------------------------------------------------------------------------------

def test_a_batch_plans_one_unit_per_student_whatever_the_folder_holds(tmp_path):
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "bob.ipynb").write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}')
    (tmp_path / "notes.txt").write_text("not a submission")
    (tmp_path / ".hidden.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "carol").mkdir()
    (tmp_path / "carol" / "submit.py").write_text("x = 3\n")
    (tmp_path / "dave").mkdir()
    os.symlink(tmp_path / "alice.py", tmp_path / "eve.py")
    units = {u.key: u for u in batch.discover(tmp_path, "causal-self-attention")}
    assert sorted(units) == ["alice.py", "bob.ipynb", "carol", "dave", "eve.py"]
    assert units["alice.py"].content == b"x = 1\n" and not units["alice.py"].rejection
    assert units["carol"].path == tmp_path / "carol" / "submit.py"
    assert units["dave"].path is None and units["dave"].rejection
    assert units["eve.py"].path is None and "link" in units["eve.py"].rejection
    run = keys.run_fingerprint("causal-self-attention", "local", None)
    assert units["alice.py"].grading_key(run) != units["carol"].grading_key(run)


# --- one error root --------------------------------------------------------------------------------------

def test_every_exception_the_project_defines_is_a_grader_error():
    """Whatever a part raises on purpose is a GraderError, so one `except GraderError` at an edge
    (the CLI, the worker, the service) holds every failure the grader means to report."""
    import ast
    import importlib

    from sandbox.errors import GraderError
    root = Path(__file__).resolve().parents[1]
    defined = []
    for package in ("grader", "sandbox", "exercise"):
        for path in sorted((root / package).rglob("*.py")):
            if "tests" in path.relative_to(root).parts:
                continue
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef) and node.bases:
                    defined.append((module, node.name))
    exceptions = []
    for module, name in defined:
        cls = getattr(importlib.import_module(module), name)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            exceptions.append(cls)
    assert len(exceptions) > 25, exceptions          # the walk found them
    outside = [f"{c.__module__}.{c.__qualname__}" for c in exceptions if not issubclass(c, GraderError)]
    assert outside == []


# (the host's variable, the Limits field it lowers, the deployed value, a value to set, the result)
HOST_LIMITS = [("CALL_LIMIT", "call_s", 4.0, v, got) for v, got in
               [("1", 1.0), ("0.5", 0.5), ("0.1", 4.0), ("9", 4.0), ("four", 4.0), ("nan", 4.0), (None, 4.0)]] + \
              [("IMPORT_LIMIT", "import_s", 20.0, v, got) for v, got in
               [("2", 2.0), ("0.1", 20.0), ("25", 20.0), ("nan", 20.0), (None, 20.0)]]


@pytest.mark.parametrize("variable,field,deployed,value,limit", HOST_LIMITS)
def test_the_hosts_limits_only_ever_lower_the_exercises(monkeypatch, variable, field, deployed, value, limit):
    """The deployed limits are 4 s a call and 20 s for the import; the host may only lower them
    (the tests of a call or an import that never returns meet 1 s and 2 s: test_grade_hostile,
    test_docker, the attacks marked `# call-limit`). Each switch leaves the other limits alone."""
    from grader import grading
    for name in ("CALL_LIMIT", "IMPORT_LIMIT"):
        monkeypatch.delenv(getattr(grading, name), raising=False)
    if value is not None:
        monkeypatch.setenv(getattr(grading, variable), value)
    limits = exercises.get(exercises.DEFAULT).limits
    assert getattr(limits, field) == deployed
    lowered = grading._host_limits(limits)
    assert getattr(lowered, field) == limit
    assert dataclasses.replace(lowered, **{field: deployed}) == limits


@pytest.mark.parametrize("changed,runs,skips", [
    (["sandbox/harness.py"], {"test_attacks", "test_local_sandbox", "test_root_sandbox", "test_grade_hostile"},
     {"test_docker", "test_encodings", "test_serve"}),
    (["sandbox/worker.py"], {"test_attacks", "test_encodings", "test_hostile_input"}, {"test_docker"}),
    (["grader/submission.py"], {"test_encodings", "test_hostile_input", "test_grade_rejected", "test_batch"},
     {"test_attacks"}),
    (["sandbox/docker.py"], {"test_docker"}, {"test_attacks"}),
    (["exercise/causal_self_attention/diagnosis.py"], {"test_diagnosis", "test_grade_buggy"}, {"test_attacks"}),
    (["README.md", "bench/grade_time.py"], set(), {"test_attacks", "test_batch"}),
])
def test_the_changed_lane_runs_the_tests_of_what_changed(changed, runs, skips):
    from tests.lanes import selection
    chosen = set(selection(changed) or ())
    assert runs <= chosen and not skips & chosen, sorted(chosen)


@pytest.mark.parametrize("changed", [["tests/conftest.py"], ["tests/lanes.py"], ["scripts/test"], ["pyproject.toml"]])
def test_a_change_the_lane_cannot_place_runs_everything(changed):
    from tests.lanes import selection
    assert selection(changed) is None
