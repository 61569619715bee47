"""The student page: an upload form that needs no JavaScript, and the feedback page of a grade,
with the terminal's content (the bug paragraphs, the points table, what went wrong) as HTML that
reads on a phone. Everything shown goes through Jinja2 with autoescape on; nothing from the
student (file name, printed text, messages) is marked safe."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

import exercise as exercises
from grader import render
from grader import submission as submissions
from grader.result import GradeResult, Status, out_of, points

REFRESH_S = 2  # how often a page of a grade not finished yet reloads itself

# The page runs no script at all; styles are inline in the page; forms post to this service only.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # a feedback page's address is its only key: never sent on
    "Cache-Control": "no-store",
}

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                          autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True)


# The paths that answer a program (JSON), not a student (a page).
API_PREFIXES = ("/v1/", "/healthz", "/docs", "/redoc", "/openapi.json")


def is_page(path: str) -> bool:
    return not path.startswith(API_PREFIXES)


def size(n: int) -> str:
    """512 KB, 16 MB: a limit as the form announces it."""
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 and n % (1024 * 1024) == 0 else f"{n // 1024} KB"


def limits_sentence() -> str:
    return (f"a .py file of at most {size(submissions.MAX_SOURCE_BYTES)} or a notebook (.ipynb) of at most "
            f"{size(submissions.MAX_NOTEBOOK_BYTES)}")


def too_large(name: str, n: int) -> str | None:
    """The form's error for a file over its kind's limit (what grading would refuse), or None."""
    limit, _ = submissions.size_limit(name)  # the limit grading applies (submission.read_bytes)
    if n <= limit:
        return None
    return f"{name} is {size(n) if n >= 1024 else f'{n} bytes'}: the grader takes {limits_sentence()}."


def form(*, error: str = "", chosen: str = exercises.DEFAULT) -> str:
    choices = [(name, ex.title) for name, ex in sorted(exercises.all_exercises().items())]
    return _env.get_template("form.html").render(exercises=choices, chosen=chosen, error=error,
                                                 py_limit=size(submissions.MAX_SOURCE_BYTES),
                                                 notebook_limit=size(submissions.MAX_NOTEBOOK_BYTES))


# What a student reads for each status the page can meet, when the service has nothing more precise.
PROBLEMS = {
    400: ("The upload was not understood", "Choose your .py or .ipynb file in the form and send it again."),
    404: ("Not found", "This address does not name a page of the grader."),
    405: ("Not a page", "This address takes uploads from the form only."),
    413: ("The file is too large", f"The grader takes {limits_sentence()}."),
    429: ("Too many uploads", "Too many uploads came from your address. Wait a minute and try again."),
    500: ("Something went wrong", "The grader failed while answering; your file may not have been graded. "
                                  "Try again in a minute."),
    503: ("Grading is unavailable", "Grading is unavailable right now. Try again in a few minutes."),
}


def problem(status: int, message: str | None = None) -> str:
    """A page for an error: its title for the status, and the message in the page's words."""
    title, default = PROBLEMS.get(status, PROBLEMS[500 if status >= 500 else 400])
    return _env.get_template("problem.html").render(title=title, message=message or default, status=status)


def waiting(*, name: str, state: str) -> str:
    return _env.get_template("waiting.html").render(name=name, state=state, refresh_s=REFRESH_S)


def not_found() -> str:
    return _env.get_template("not_found.html").render()


@dataclass(frozen=True)
class Row:
    ok: bool
    title: str
    points: str


@dataclass(frozen=True)
class Failure:
    headings: tuple  # (group title, "n of m cases") for each group the failure covers
    case: str
    how: str
    feedback: str
    others: str


def feedback(result: GradeResult, *, grade_id: str = "", requested: bool = False, request_error: str = "") -> str:
    """The feedback page of a finished grade: what render.build shows on the terminal, as HTML,
    made of what the student may see (GradeResult.visible_part)."""
    result = result.visible_part()
    rows, failures = [], []
    if result.status is Status.GRADED:
        rows = [Row(g.score >= g.max_score - 1e-9, g.title, out_of(g.score, g.max_score))
                for g in result.groups() if g.max_score != 0]
        for item in render.failures(result):
            failures.append(Failure(tuple((g.title, f"{len(f)} of {len(g.tests)} cases") for g, f in item.groups),
                                    item.case, item.how, item.feedback, item.others))
    sentence, details = split_diagnosis(result.diagnosis or "")
    return _env.get_template("feedback.html").render(
        r=result, status=result.status.value, rows=rows, failures=failures,
        diagnosis_sentence=sentence, diagnosis_details=details,
        score="" if result.score is None else out_of(result.score, result.max_score), max_score=points(result.max_score),
        sandbox=result.environment.get("sandbox", "?"), grade_id=grade_id, requested=requested,
        request_error=request_error)


def split_diagnosis(text: str) -> tuple[str, list[str]]:
    """An unexplained mistake's one sentence, and the probes' numbers behind it, one per item:
    "the output is wrong and ...: with A: ...; with B: ...; and 57 more probes" gives the sentence
    up to the first ": with " and the items after it."""
    sentence, sep, rest = text.partition(": with ")
    if not sep:
        return text, []
    items = [item.strip() for item in ("with " + rest).split("; ") if item.strip()]
    return sentence.rstrip(".") + ".", items
