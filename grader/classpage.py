"""The class report: a self-contained HTML page of a batch regrade for the instructor (no JavaScript,
no external URLs, inline CSS and SVG), built from the rows and the summary grader.classreport makes.
Submission names and messages are student-controlled text: every one of them is escaped here.
"""
from __future__ import annotations

import os
from urllib.parse import quote

from grader.classreport import (
    BINS,
    FINAL_BASIS,
    MAX_MESSAGE,
    SCORED,
    ClassSummary,
    Row,
    _counted,
    _num,
    _score,
    write_atomic,
)
from grader.render import WITHHELD
from grader.instructor_sections import _anchor, _e, _link, cluster_anchor, clusters_section, similar_section
from grader.result import is_course_bug


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;margin:2rem auto;
max-width:1100px;padding:0 1rem}
h1{font-size:1.6rem;margin:0 0 1rem}h2{font-size:1.2rem;margin:2rem 0 .6rem;border-bottom:1px solid #ddd}
.cards{display:flex;flex-wrap:wrap;gap:.6rem}
.card{border:1px solid #ddd;border-radius:6px;padding:.5rem .9rem;min-width:7rem}
.card b{display:block;font-size:1.5rem}.card.bad{border-color:#c62828;background:#fdecea}
.alert{border:2px solid #c62828;background:#fdecea;border-radius:6px;padding:.6rem 1rem;margin:1rem 0}
.alert ul{margin:.3rem 0 0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .5rem;vertical-align:top}
th{border-bottom:2px solid #ccc}tr+tr td{border-top:1px solid #eee}
td.num,th.num{text-align:right;white-space:nowrap}td.wrap{white-space:normal;min-width:9rem}
.bar{background:#eee;border-radius:3px;width:9rem;height:.8rem;display:inline-block;vertical-align:middle}
.bar span{display:block;height:100%;border-radius:3px;background:#1565c0}
.bar.low span{background:#c62828}
.badge{display:inline-block;border-radius:3px;padding:0 .4rem;font-size:.85em;color:#fff}
.graded{background:#2e7d32}.rejected{background:#ef6c00}.error{background:#c62828}
.advice{background:#757575}
code{font-size:.9em;background:#f4f4f4;padding:0 .2rem;border-radius:3px;word-break:break-all}
.muted{color:#666}code.nowrap{white-space:nowrap;word-break:normal}.fix{color:#444;font-size:.92em}
details{margin:.4rem 0}summary{cursor:pointer}
.sbs{display:grid;grid-template-columns:1fr 1fr;gap:.6rem}
.sbs pre{margin:0;font-size:12px;line-height:1.35;background:#fafafa;border:1px solid #ddd;overflow-x:auto;padding:.3rem}
.sbs .same{background:#fff3c4;display:block}.sbs .ln{color:#999;user-select:none}
.cluster{border:1px solid #ddd;border-radius:6px;padding:.2rem 1rem .6rem;margin:.8rem 0}
.cluster h3{font-size:1.05rem;margin:.5rem 0 .2rem}.cluster p{margin:.3rem 0}
.cl{display:grid;gap:.6rem;margin:.4rem 0}.cl .who{font-size:.9em;margin-bottom:.2rem}
.cl pre,.snippet{margin:0;font-size:12px;line-height:1.35;background:#fafafa;border:1px solid #ddd;overflow-x:auto;
padding:.3rem}.cl .diff{background:#ffd7cc;display:block}.cl .gap{color:#999}.cl .ln{color:#999;user-select:none}
.vis{background:#8e24aa}.note{border:1px solid #ce93d8;background:#f8f0fb;border-radius:6px;padding:.6rem 1rem;
margin:1rem 0}.note ul{margin:.3rem 0 0}
.flag{background:#6a1b9a}.evidence{font-size:.9em;color:#333;max-width:60rem}
svg text{font:12px system-ui,sans-serif;fill:#333}
"""


def write_html(summary: ClassSummary, rows: list[Row], path: str | os.PathLike, *, title: str,
               similar=(), clusters=(), released: tuple[str, ...] = (), code=None, standings=None) -> None:
    """The self-contained HTML class report, written atomically."""
    write_atomic(path, render_html(summary, rows, title=title, similar=similar, clusters=clusters,
                                   released=released, code=code, standings=standings))


def render_html(summary: ClassSummary, rows: list[Row], *, title: str, similar=(), clusters=(),
                released: tuple[str, ...] = (), code=None, standings=None) -> str:
    """The HTML class report as text: inline CSS and SVG, no script, no external resource.
    `similar`: grader.similarity.Pair of submissions much alike; `clusters`: grader.clusters.Cluster;
    `released`: the visibilities the students' pages show (grader.course); `code`: the submissions'
    code by shown name, with the class's full-marks code for the clusters to be read against
    (grader.instructor_sections.ClassCode); `standings`: grader.term.Standing by row key, the term's
    columns of the submissions' table (the summary's statistics say whether they are final scores)."""
    body = [f"<h1>{_e(title)}</h1>"]
    if not rows:
        body.append('<p class="muted">No submissions.</p>')
    else:
        body += [_cards(summary), _errors_alert(summary, rows), _lookalikes_alert(summary),
                 _withheld_note(summary, released),
                 _distribution_heading(summary), _histogram_svg(summary),
                 _bugs_section(summary), clusters_section(clusters, code), _groups_section(summary),
                 similar_section(similar), _submissions_section(summary, rows, clusters, standings)]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(part for part in body if part) + "\n</body>\n</html>\n")




def _cards(s: ClassSummary) -> str:
    out_of = f" / {_num(s.max_score)}" if s.max_score else ""
    which = "final score" if s.final else "score"
    cards = [("Submissions", str(s.total), ""), ("Graded", str(s.graded), ""),
             ("Rejected", str(s.rejected), ""), ("Errors", str(s.errors), " bad" if s.errors else ""),
             (f"Mean {which}", _num(s.mean, 1) + out_of if s.mean is not None else "—", ""),
             (f"Median {which}", _num(s.median, 1) + out_of if s.median is not None else "—", "")]
    return '<div class="cards">' + "".join(
        f'<div class="card{cls}">{label}<b>{value}</b></div>' for label, value, cls in cards) + "</div>"


def _errors_alert(s: ClassSummary, rows: list[Row]) -> str:
    if not s.errors:
        return ""
    messages = {r.submission: _message(r) for r in rows if r.status not in SCORED}
    items = "".join(f"<li><code>{_e(name)}</code>"
                    + (f' <span class="muted">{_e(messages[name])}</span>' if messages.get(name) else "")
                    + "</li>" for name in s.error_submissions)
    noun = "submission" if s.errors == 1 else "submissions"
    return (f'<div class="alert"><strong>{s.errors} {noun} could not be graded</strong> because the '
            f"grader failed; no score was recorded. Rerun {'it' if s.errors == 1 else 'them'}:"
            f"<ul>{items}</ul></div>")


def _lookalikes_alert(s: ClassSummary) -> str:
    if not s.lookalikes:
        return ""
    items = "".join("<li>" + " · ".join(_link(name) for name in group) + "</li>" for group in s.lookalikes)
    return ('<div class="alert" id="lookalikes"><strong>Names that read the same</strong>: each of these is '
            "graded as a submission of its own, though their names look alike (an invisible character, or a "
            "letter of another alphabet, shown here as its code such as <code>\\u0430</code>). Check who "
            f"handed in which before the grades go out.<ul>{items}</ul></div>")


def _withheld_note(s: ClassSummary, released: tuple[str, ...]) -> str:
    """Which groups the students' pages leave out (their points included in the grades)."""
    if not s.withheld:
        return ""
    items = "".join(f"<li>{_e(g.title)} ({_num(g.max_score)} points): {_visibility_badge(g.visibility)}"
                    + (" · <b>released</b>: on the students' pages" if g.visibility in released else
                       " · not on the students' pages") + "</li>" for g in s.withheld)
    held = sorted({g.visibility for g in s.withheld} - set(released))
    how = (f" To show them, put <code class=\"nowrap\">released = [{', '.join(_e(repr(v).replace(chr(39), chr(34))) for v in held)}]"
           "</code> in the course file and run the batch again (a rescore, no regrade)." if held else "")
    return (f'<div class="note" id="withheld"><strong>Groups the students do not see yet</strong>: '
            f"they count in every grade here and in the gradebook.{how}<ul>{items}</ul></div>")


def _visibility_badge(visibility: str) -> str:
    return f'<span class="badge vis">{_e(WITHHELD.get(visibility, visibility))}</span>'


def _distribution_heading(s: ClassSummary) -> str:
    """Which scores the cards and the histogram count: the grader's, or the final ones."""
    if not s.final:
        return "<h2>Score distribution</h2>"
    return (f'<h2 id="distribution">Score distribution <span class="muted">({FINAL_BASIS}; '
            "the grader's scores are in the submissions' table)</span></h2>")


def _histogram_svg(s: ClassSummary) -> str:
    if not any(s.histogram):
        return '<p class="muted">No scored submissions.</p>'
    width, height, left, bottom, top = 640, 210, 10, 40, 20
    slot = (width - 2 * left) / BINS
    tallest = max(s.histogram)
    # No xmlns: inline SVG in HTML needs none, and the report names no URL at all.
    parts = [(f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
              'aria-label="Histogram of scores">')]
    for i, (count, label) in enumerate(zip(s.histogram, s.bin_labels())):
        bar = (height - bottom - top) * count / tallest
        x, y = left + i * slot + 4, height - bottom - bar
        noun = "submission" if count == 1 else "submissions"
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot - 8:.1f}" height="{bar:.1f}" '
                     f'fill="#1565c0"><title>{count} {noun} scored {label}</title></rect>')
        parts.append(f'<text x="{x + (slot - 8) / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle">'
                     f"{count}</text>")
        parts.append(f'<text x="{x + (slot - 8) / 2:.1f}" y="{height - bottom + 16}" '
                     f'text-anchor="middle">{label}</text>')
    parts.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width - left}" y2="{height - bottom}" '
                 'stroke="#999"/></svg>')
    return "".join(parts)


def _bugs_section(s: ClassSummary) -> str:
    scored = s.graded + s.rejected
    out = ["<h2>Bugs, most common first</h2>"]
    if not s.bugs:
        return out[0] + '<p class="muted">No bug was diagnosed.</p>'
    out.append('<table><tr><th class="num">Students</th><th></th><th>Bug</th><th>Fix</th></tr>')
    for bug in s.bugs:
        share = bug.count / scored if scored else 0.0
        label = '<span class="badge advice">advice, no points</span> ' if bug.advice else ""
        ident = ('<br><a class="muted" href="#clusters">named in the course file</a>' if is_course_bug(bug.id)
                 else f"<br><code>{_e(bug.id)}</code>")
        out.append(f'<tr><td class="num">{bug.count}</td><td>{_bar(share)}</td>'
                   f"<td>{label}{_e(bug.title)}{ident}</td>"
                   f'<td class="fix">{_e(bug.fix)}</td></tr>')
    return "".join(out) + "</table>"


def _groups_section(s: ClassSummary) -> str:
    head = "<h2>Weakest test groups</h2>"
    if not s.weakest:
        return head + '<p class="muted">No graded submission lost points in any test group.</p>'
    out = [head, ('<table><tr><th>Test group</th><th class="num">Points earned</th><th></th>'
                  '<th class="num">Students who lost points</th></tr>')]
    for g in s.weakest:
        badge = f" {_visibility_badge(g.visibility)}" if g.visibility != "visible" else ""
        out.append(f"<tr><td>{_e(g.title)}{badge}<br><code>{_e(g.group)}</code></td>"
                   f'<td class="num">{g.mean_fraction:.0%}</td><td>{_bar(g.mean_fraction, low=True)}</td>'
                   f'<td class="num">{g.lost} of {g.submissions}</td></tr>')
    return "".join(out) + "</table>"


TERM_HEADINGS = ("Late days", "Late penalty", "Adjustment", "Final")


def _submissions_section(s: ClassSummary, rows: list[Row], clusters=(), standings=None) -> str:
    advice = {b.id for b in s.bugs if b.advice}
    titles = {b.id: b.title for b in s.bugs}
    numbers = {c.id: i for i, c in enumerate(clusters, 1)}
    term = "" if standings is None else "".join(f'<th class="num">{h}</th>' for h in TERM_HEADINGS)
    score_heading = "Grader's score" if term else "Score"
    out = ["<h2>Submissions</h2>", ('<table id="submissions"><tr><th>Submission</th><th>Status</th>'
                                    f'<th class="num">{score_heading}</th>{term}<th>Bugs</th><th>Result</th></tr>')]
    for row in sorted(rows, key=lambda r: _listing_order(r, standings)):
        status = row.status if row.status in SCORED else "error"
        score = "—" if row.status not in SCORED else f"{_num(_score(row))} / {_num(row.max_score)}"
        if standings is not None:
            score += "".join(f'</td><td class="num{" wrap" if "<br>" in cell else ""}">{cell}'
                             for cell in _term_cells(standings.get(row.key)))
        # Titles, as people read them; the id (for a course file or a search) on hover.
        named = [f'<span title="{_e(b)}"' + (' class="muted"' if b in advice else "")
                 + f">{_e(titles.get(b, title))}</span>" for b, title in row.bug_titles().items()
                 if not is_course_bug(b)]
        if row.cluster and row.status == "graded":
            cluster = next((titles.get(b, t) for b, t in row.bug_titles().items() if is_course_bug(b)), "")
            number = numbers.get(row.cluster)
            label = (_e(cluster) if cluster else "unexplained mistake" + (f", cluster {number}" if number else ""))
            named.append(f'<a href="#{cluster_anchor(row.cluster)}">{label}</a>')
        bugs = "; ".join(named)
        links = [f'<a href="{_e(quote(f.replace(os.sep, "/")))}">{label}</a>'
                 for f, label in ((row.page_file, "feedback"), (row.result_file, "JSON")) if f]
        link = " · ".join(links) or '<span class="muted">none</span>'
        name = (f'<a href="{_e(quote(row.page_file.replace(os.sep, "/")))}"><code>{_e(row.submission)}</code></a>'
                if row.page_file else f"<code>{_e(row.submission)}</code>")
        message = _message(row) if row.status != "graded" else ""
        reason = f'<br><span class="muted">{_e(message)}</span>' if message else ""
        out.append(f'<tr id="s-{_e(_anchor(row.submission))}"><td>{name}{reason}</td>'
                   f'<td><span class="badge {status}">{_e(row.status)}</span></td>'
                   f'<td class="num">{score}</td><td>{bugs}</td><td>{link}</td></tr>')
    return "".join(out) + "</table>"


def _term_cells(s) -> list[str]:
    """A grader.term.Standing's cells of the submissions' table: days late, the penalty, the
    adjustment (its note under it, escaped), the final score ('—' where there is none)."""
    if s is None or s.final is None:
        return ["—"] * len(TERM_HEADINGS)
    adjustment = f"{'+' if s.adjustment > 0 else '−'}{_num(abs(s.adjustment))}" if s.adjustment else "0"
    if s.extension_days:
        adjustment += f'<br><span class="muted">extension {_num(s.extension_days)} d</span>'
    if s.note:
        adjustment += f'<br><span class="muted">{_e(s.note)}</span>'
    penalty = f"−{_num(s.penalty)}" if s.penalty else "0"
    return [str(s.late_days), penalty, adjustment, f"<b>{_num(s.final)} / {_num(s.max_score)}</b>"]


def _listing_order(row: Row, standings=None) -> tuple:
    """Errors first, then by the score the summary counts (ascending), then by name."""
    scored = row.status in SCORED
    return (scored, _counted(row, standings) if scored else 0.0, row.submission)


def _message(row: Row) -> str:
    message = row.result.get("message") if isinstance(row.result, dict) else None
    if not message:
        return ""
    text = str(message)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "…"


def _bar(fraction: float, *, low: bool = False) -> str:
    width = min(max(fraction, 0.0), 1.0) * 100
    return f'<span class="bar{" low" if low else ""}"><span style="width:{width:.1f}%"></span></span>'
