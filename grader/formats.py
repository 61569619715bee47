"""A GradeResult in the results formats of the platforms that plug the grader in.

The rules each function follows are the platform's, as written down in the project's research notes:
Gradescope's `results.json` (autograder specs) and PrairieLearn's external grader `results.json`.
Text from the student's run may hold anything: the result's text is already cleaned (grader.text,
when the result is made); here every string is bounded, and the whole file is kept under the
platform's size limit.
"""
from __future__ import annotations

import json

from grader import render
from grader.result import Bug, GradeResult, Status, TestResult, TestStatus, Visibility, out_of
from grader.text import safe

FORMATS = ("native", "gradescope", "prairielearn")

MAX_FILE_BYTES = 1_000_000        # PrairieLearn refuses larger; Gradescope gets the same bound
MAX_TEST_OUTPUT = 6_000           # characters per test; the first failure says what matters
MAX_OUTPUT = 60_000               # characters of the whole-submission text

GRADER_FAILED = ("The grader itself failed while grading this submission; this is not a verdict on "
                 "your code, and no score was recorded. Your instructor can regrade it.")

def to_format(result: GradeResult, name: str) -> dict:
    """The result as the JSON document of format `name` (one of FORMATS)."""
    if name == "native":
        return result.to_dict()
    if name == "gradescope":
        return gradescope(result)
    if name == "prairielearn":
        return prairielearn(result)
    raise ValueError(f"unknown format {name!r}; known: {', '.join(FORMATS)}")


def dumps(document: dict) -> str:
    """The document as the text written to disk, within MAX_FILE_BYTES."""
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if len(text.encode()) <= MAX_FILE_BYTES:
        return text
    _shrink(document)
    return json.dumps(document, ensure_ascii=False)


# ---------------------------------------------------------------------------------------- Gradescope

def gradescope(result: GradeResult) -> dict:
    """Gradescope's results.json. A grader failure has no `score`: Gradescope then reports the run as
    an autograder failure instead of recording a zero (and `run_autograder` exits non-zero)."""
    shown = result.visible_part()
    document = {
        "execution_time": round(result.duration_s, 3),
        "output": _clean(_summary(result, shown), MAX_OUTPUT),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": _extra(result),
        "tests": [],
    }
    if result.status is Status.ERROR:
        return document
    document["score"] = round(result.score or 0.0, 4)
    numbers = _numbers(result)
    document["tests"] = [{
        "name": _clean(test.name, 300),
        "number": numbers[test.id],
        "score": round(test.score, 4),
        "max_score": round(test.max_score, 4),
        "status": "passed" if test.status is TestStatus.PASSED else "failed",
        "output": _clean(_test_output(test, result.bugs), MAX_TEST_OUTPUT),
        "output_format": "text",
        "tags": list(test.bugs),
        # Gradescope's own vocabulary: visible, after_due_date, hidden (after_published unused).
        "visibility": test.visibility.value,
    } for test in result.tests]
    return document


def _numbers(result: GradeResult) -> dict[str, str]:
    """"group.case" numbers in suite order, as Gradescope sorts them."""
    return {test.id: f"{g}.{c}" for g, group in enumerate(result.groups(), 1)
            for c, test in enumerate(group.tests, 1)}


# -------------------------------------------------------------------------------------- PrairieLearn

def prairielearn(result: GradeResult) -> dict:
    """PrairieLearn's external-grader results.json. A rejected submission and a grader failure are
    `gradable: false`: the student keeps the attempt and `format_errors` says why."""
    if result.status is not Status.GRADED:
        reason = result.message if result.status is Status.REJECTED else f"{GRADER_FAILED} ({result.message})"
        heading = ("Your submission could not be graded." if result.status is Status.REJECTED
                   else "The grader failed; this attempt does not count.")
        return {"gradable": False, "score": 0.0, "format_errors": [_clean(reason, MAX_TEST_OUTPUT)],
                "message": heading, "output": _clean(result.feedback, MAX_OUTPUT), "tests": [],
                "extra_data": _extra(result)}
    shown = result.visible_part()
    tests = [{
        "name": _clean(test.name, 300),
        "description": _clean(test.group_title, 300),
        "points": round(test.score, 4),
        "max_points": round(test.max_score, 4),
        "message": render.status_label(test),
        "output": _clean(_test_output(test, result.bugs), MAX_TEST_OUTPUT),
    } for test in shown.tests]
    held = [t for t in result.tests if t.visibility is not Visibility.VISIBLE]
    if held:  # PrairieLearn shows every test it is given: the others become one line, without details
        tests.append({"name": "Tests not shown", "description": shown.withheld,
                      "points": round(sum(t.score for t in held), 4),
                      "max_points": round(sum(t.max_score for t in held), 4),
                      "message": "details are not shown for these tests", "output": ""})
    score = (result.score or 0.0) / result.max_score if result.max_score else 0.0
    return {"gradable": True, "score": round(min(1.0, max(0.0, score)), 6),
            "message": _clean(_headline(result, shown), 2000),
            "output": _clean(_summary(result, shown), MAX_OUTPUT), "tests": tests,
            "extra_data": _extra(result)}


# ------------------------------------------------------------------------------------------- shared

def _summary(result: GradeResult, shown: GradeResult) -> str:
    """The readable text for the whole submission, made only of what the student may see now."""
    return render.plain_text(shown) if shown is not result else result.feedback or render.plain_text(result)


def _headline(result: GradeResult, shown: GradeResult) -> str:
    bugs = [b for b in shown.bugs if not b.advice]
    assert result.score is not None  # graded (prairielearn's caller): only a grader error has no score
    line = f"Score {out_of(result.score, result.max_score)}."
    if bugs:
        line += " " + " ".join(f"{b.title}." for b in bugs)
    return line


def _test_output(test: TestResult, bugs: tuple[Bug, ...]) -> str:
    """A failed test's feedback, led by the bugs diagnosed in it: what is wrong and how to fix it."""
    if test.status is TestStatus.PASSED:
        return ""
    by_id = {b.id: b for b in bugs}
    named = [by_id[i] for i in test.bugs if i in by_id]
    lead = "".join(f"{'Advice' if b.advice else 'Bug'}: {b.title}{f' [{b.label}]' if b.label else ''}\n"
                   f"{b.explanation}\nFix: {b.fix}\n\n"
                   for b in named)
    return lead + (test.feedback or "")


def _extra(result: GradeResult) -> dict:
    """Stored by the platform, not shown: enough to trace a grade back to a file and a grader."""
    return {"status": result.status.value, "exercise": result.exercise,
            "submission": result.submission_name, "sha256": result.submission_sha256,
            "environment": result.environment, **({"message": result.message} if result.message else {})}


def _clean(text: str, limit: int) -> str:
    text = safe(text or "")  # the result's own text is clean already; the shrinking cuts any string
    if len(text) > limit:
        text = text[:limit - 40] + f"\n... ({len(text) - limit + 40} more characters cut)"
    return text


def _shrink(document, limit: int = 20_000) -> None:
    """Last resort under MAX_FILE_BYTES: cut every long string in the document (any format), to
    shorter lengths each round. Terminates: at 200 characters a string cannot grow the file past
    the limit for any document the grader makes."""
    def cut(node):
        if isinstance(node, dict):
            for key, value in node.items():
                node[key] = _clean(value, limit) if isinstance(value, str) else cut(value)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                node[i] = _clean(value, limit) if isinstance(value, str) else cut(value)
        return node

    while limit >= 200:
        cut(document)
        if len(json.dumps(document, ensure_ascii=False).encode()) <= MAX_FILE_BYTES:
            return
        limit //= 2
