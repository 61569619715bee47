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


def form(*, error: str = "", max_bytes: int, chosen: str = exercises.DEFAULT) -> str:
    choices = [(name, ex.title) for name, ex in sorted(exercises.all_exercises().items())]
    return _env.get_template("form.html").render(exercises=choices, chosen=chosen, error=error,
                                                 max_kb=max_bytes // 1024)


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
    return _env.get_template("feedback.html").render(
        r=result, status=result.status.value, rows=rows, failures=failures,
        score="" if result.score is None else out_of(result.score, result.max_score), max_score=points(result.max_score),
        sandbox=result.environment.get("sandbox", "?"), grade_id=grade_id, requested=requested,
        request_error=request_error)
