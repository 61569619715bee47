"""A student's feedback page: the text `grade FILE` prints on the terminal, colours included, as a
self-contained HTML file (no script, no external resource), for the class report to link to. The
page is the student's: it links to nothing of the instructor's (the full result JSON, the class
report), and shows the term's book-keeping for that student (grader.term: a late penalty, the
instructor's adjustment and note) under the feedback.

Rich renders the same renderable the terminal shows (grader.render.build) and escapes every
character of it, so a file name or an error message with `<script>` in it is shown, never run.
"""
from __future__ import annotations

import html
import io
import os

from rich.console import Console
from rich.terminal_theme import DEFAULT_TERMINAL_THEME

from grader import render
from grader.result import GradeResult

WIDTH = 100
TERM_MARK = '<section id="term">'   # where the term's lines begin (grader.term)

# Braces doubled: Rich fills {code}, {stylesheet}, {foreground} and {background} in.
_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body{{{{margin:2rem auto;max-width:1100px;padding:0 1rem;font:15px/1.45 system-ui,sans-serif;color:#1f2328}}}}
pre{{{{background:{{background}};color:{{foreground}};padding:1rem;border-radius:6px;overflow-x:auto;
font:13px/1.35 'DejaVu Sans Mono',Menlo,consolas,monospace}}}}
{{stylesheet}}
</style>
</head>
<body>
<pre><code>{{code}}</code></pre>
{term}</body>
</html>
"""


def render_page(result: GradeResult, *, released: tuple[str, ...] = (), term: tuple[str, ...] = ()) -> str:
    """The page as text. It shows what the student may see now (GradeResult.visible_part), the
    groups of `released` visibilities included (grader.course), then `term`: lines of the term's
    book-keeping (grader.term.Standing.lines), escaped here."""
    console = Console(record=True, file=io.StringIO(), width=WIDTH, color_system="truecolor",
                      force_terminal=True, highlight=False, emoji=False)
    console.print(render.build(result.visible_part(released)))
    page = _PAGE.format(title=_braces(html.escape(f"{result.exercise} · {result.submission_name}")),
                        term=_braces(_term_block(term)))
    return console.export_html(theme=_LIGHT, code_format=page, inline_styles=True)


def _term_block(lines: tuple[str, ...]) -> str:
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f'{TERM_MARK}<h2>Your grade this term</h2><ul>{items}</ul></section>\n'


def _braces(text: str) -> str:
    """Text that Rich's own format() call leaves as it is."""
    return text.replace("{", "{{").replace("}", "}}")


def write_page(result: GradeResult, path: os.PathLike, *, released: tuple[str, ...] = (),
               term: tuple[str, ...] = ()) -> None:
    from grader.classreport import write_atomic
    write_atomic(path, render_page(result, released=released, term=term))


# The terminal's colours on a light page (Rich's default theme is a dark terminal's).
_LIGHT = DEFAULT_TERMINAL_THEME.__class__((250, 250, 250), (31, 35, 40), [
    (0, 0, 0), (198, 40, 40), (46, 125, 50), (158, 105, 0), (21, 101, 192), (123, 31, 162), (0, 131, 143),
    (97, 97, 97)], [(97, 97, 97), (198, 40, 40), (46, 125, 50), (158, 105, 0), (21, 101, 192), (123, 31, 162),
                    (0, 131, 143), (31, 35, 40)])
