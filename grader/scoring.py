"""Turning the harness's raw report into a typed GradeResult. The report is parsed here, once."""
from __future__ import annotations

import dataclasses

from grader import clusters
from grader.course import full_marks
from grader.errors import GraderError
from grader.result import COURSE_BUG, Bug, GradeResult, Status, TestResult, TestStatus, Visibility
from grader.submission import Submission
from sandbox.contract import rejection_text
from sandbox.source import python_lines


NAMED_CLUSTER = ("Your instructor found this mistake in code that behaves exactly like yours: the same tests "
                 "fail, with the same differences from the correct output.")


class ReportError(GraderError, ValueError):
    """The harness's report does not have the expected shape (a grader fault, never the student's)."""


def result_from_report(report: dict, *, submission: Submission, exercise, sandbox: str,
                       duration_s: float, grader_version: str, course=None) -> GradeResult:
    """Score a raw report: points of passed tests; a grader fault in any test voids the score.
    `course` (grader.course.Course): the instructor's points, visibility, advice costs and names of
    clusters, applied here, on the host, so that a stored report can be scored again."""
    environment = {"grader": grader_version, **_dict(report.get("environment")), "sandbox": sandbox,
                   **(course.environment() if course else {})}
    base = dict(exercise=exercise.name, submission_name=submission.name,
                submission_sha256=submission.sha256, duration_s=duration_s, environment=environment,
                notes=tuple(str(n) for n in report.get("notes") or ()), report=report)
    most = full_marks(exercise, course)
    status = report.get("status")
    if status == "rejected":
        message = rejection_message(_dict(report.get("rejection")), exercise, submission)
        return GradeResult(status=Status.REJECTED, score=0.0, max_score=most,
                           message=message, **base)
    if status != "graded":
        return GradeResult(status=Status.ERROR, score=None, max_score=most,
                           message=f"the grader failed: {report.get('error', 'no report')}", **base)
    bugs = tuple(_bug(raw) for raw in report.get("bugs") or ())
    tests = tuple(_with_bugs(_test(raw), bugs) for raw in report.get("tests") or ())
    if not tests:
        raise ReportError("the report lists no tests")
    diagnosis = str(report.get("diagnosis_note") or "")
    cluster = clusters.signature(tests, bugs, diagnosis)  # the report's own, before a course's weights
    max_score = round(sum(t.max_score for t in tests), 9)
    if abs(max_score - exercise.max_score) > 1e-6:  # a report that is not the exercise's whole suite
        raise ReportError(f"the tests add up to {max_score:g} points, the exercise to {exercise.max_score:g}")
    if course:
        bugs, deductions = course.advice_costs(bugs)
        tests = course.apply_tests(tests) + deductions
        max_score = round(sum(t.max_score for t in tests), 9)
    internal = [raw for raw in report["tests"] if raw.get("internal")]
    if internal:
        return GradeResult(status=Status.ERROR, score=None, max_score=max_score, tests=tests,
                           message=f"the grader failed in {internal[0].get('id')}: "
                                   f"{internal[0].get('feedback')}", **base)
    # points shared by a group's cases add up in floats; a course's deductions stop at 0
    score = max(0.0, round(sum(t.score for t in tests), 9))
    bugs = _agreeing(bugs, tests)
    if score < max_score and not diagnosis and all(b.advice for b in bugs):
        diagnosis = ("tests failed and no mistake in the catalog explains it; the failed tests below show "
                     "where your output differs")
    named = course.cluster_name(cluster) if course and cluster else None
    evidence = ""
    if named:
        # The instructor's words replace the diagnosis, which says that no known mistake explains
        # the output: the student would read both. The diagnosis stays the instructor's evidence.
        failed = tuple(dict.fromkeys(t.function for t in tests if t.score < t.max_score))
        bugs += (Bug(id=f"{COURSE_BUG}{named.id}", title=named.title, fix=named.fix,
                     explanation=named.explanation or NAMED_CLUSTER, affects=failed),)
        tests = tuple(_with_bugs(t, bugs) for t in tests)
        diagnosis, evidence = "", diagnosis
    return GradeResult(status=Status.GRADED, score=score, max_score=max_score, tests=tests, bugs=bugs,
                       diagnosis=diagnosis, printed=str(report.get("printed") or ""), cluster=cluster,
                       cluster_evidence=evidence, **base)



def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _test(raw: dict) -> TestResult:
    try:
        status = TestStatus(raw["status"])
        points = float(raw["points"])
        case = raw.get("case")
        name = raw["group_title"] + (f" [{case}]" if case else "")
        return TestResult(id=str(raw["id"]), name=name, group=str(raw["group"]),
                          group_title=str(raw["group_title"]), status=status,
                          score=points if status is TestStatus.PASSED else 0.0, max_score=points,
                          feedback=str(raw.get("feedback") or ""),
                          bugs=tuple(str(b) for b in raw.get("bugs") or ()),
                          visibility=Visibility(raw.get("visibility") or "visible"))
    except (KeyError, ValueError, TypeError) as err:
        raise ReportError(f"malformed test entry {raw!r:.200}: {err}") from err


def _bug(raw: dict) -> Bug:
    try:
        return Bug(id=str(raw["id"]), title=str(raw["title"]), explanation=str(raw["explanation"]),
                   fix=str(raw["fix"]), variant=raw.get("variant") or None,
                   evidence=str(raw.get("evidence") or ""), advice=bool(raw.get("advice")),
                   affects=tuple(str(a) for a in raw.get("affects") or ()))
    except (KeyError, TypeError) as err:
        raise ReportError(f"malformed bug entry {raw!r:.200}: {err}") from err


def _agreeing(bugs: tuple[Bug, ...], tests: tuple[TestResult, ...]) -> tuple[Bug, ...]:
    """Score and feedback agree: a mistake that cost no points in this grade (every test group it
    affects kept its points) is presented as advice, never as a bug."""
    lost = {t.function for t in tests if t.score < t.max_score}
    return tuple(b if b.advice or lost & set(b.affects) else dataclasses.replace(b, advice=True) for b in bugs)


def _with_bugs(test: TestResult, bugs: tuple[Bug, ...]) -> TestResult:
    """A failed test carries the diagnosed bugs that cost points in its group."""
    if test.status is TestStatus.PASSED:
        return test
    ids = list(test.bugs) + [b.id for b in bugs if test.function in b.affects and b.id not in test.bugs]
    return dataclasses.replace(test, bugs=tuple(ids))


def rejection_message(rejection: dict, exercise, submission: Submission) -> str:
    """Exactly what is wrong with a submission that cannot be graded, and where: in the words the
    exercise's entry contract gives (sandbox.contract)."""
    locate = submission.line_map.describe(python_lines(submission.script))
    error = _dict(rejection.get("error"))
    line = error.get("line") if isinstance(error.get("line"), int) else rejection.get("line")
    at = f" at {locate(line)}" if isinstance(line, int) else ""
    return rejection_text(exercise.entry, rejection, at, dict(exercise.rejections))
