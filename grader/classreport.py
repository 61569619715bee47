"""What a batch regrade of a whole class produced, for the instructor.

Three views of the same rows: a gradebook CSV (one line per submission), a self-contained HTML
class report (no JavaScript, no external URLs, inline CSS and SVG), and a short terminal summary.
Submission names and rejection messages are student-controlled text: the CSV guards them against
spreadsheet formula injection, the HTML escapes them, the terminal prints them as plain `Text`.
"""
from __future__ import annotations

import csv
import io
import math
import os
import secrets
import statistics
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader import text as texts
from grader.result import POINT_DIGITS, group_title, is_course_bug
from grader.result import points as readable
from grader.render import WITHHELD
from grader.reportparts import _anchor, _e, _link, cluster_anchor, clusters_section, similar_section

# `bugs` holds ids (for scripts), `bug_titles` the same bugs as people read them, `cluster` the id of an
# unexplained mistake's cluster (the class report's section of that id).
GRADEBOOK_HEADER = ("submission", "status", "score", "max_score", "bugs", "duration_s", "bug_titles", "cluster")
SCORED = ("graded", "rejected")     # statuses that carry a score (a rejection scores 0)
BINS = 10
TOP_GROUPS = 10
MAX_MESSAGE = 500                   # characters of a rejection/error message shown in the HTML

_EPS = 1e-9


@dataclass(frozen=True)
class Row:
    """One submission of the batch, as the batch runner saw it."""
    submission: str          # the submission's name as shown (grader.text.names): its entry in the batch folder
    status: str              # "graded" | "rejected" | "error"
    score: float | None      # None when status == "error"
    max_score: float
    bug_ids: tuple[str, ...]  # ids of the bugs diagnosed
    duration_s: float
    result: dict | None = None   # the native result JSON; None when no result exists
    result_file: str = ""        # path of the result JSON relative to the output folder, for links
    page_file: str = ""          # path of the student's feedback page (grader.feedback_pages), for links
    key: str = ""                # the entry's name as it is (the index's key), when it is known

    @property
    def cluster(self) -> str:
        """The id of its unexplained mistake's behaviour (grader.clusters), or ''."""
        cid = self.result.get("cluster") if isinstance(self.result, dict) else None
        return cid if isinstance(cid, str) else ""

    def bug_titles(self) -> dict[str, str]:
        """Its bugs' ids with their titles, in the result's order (an id without a title: itself)."""
        titles = {str(b.get("id")): str(b.get("title") or b.get("id")) for b in _list(self.result, "bugs")
                  if isinstance(b, dict) and b.get("id") is not None}
        return {bug_id: titles.get(bug_id, bug_id) for bug_id in dict.fromkeys(self.bug_ids)}


@dataclass(frozen=True)
class BugCount:
    """One bug id across the class: how many submissions made it, and how to fix it."""
    id: str
    title: str
    fix: str
    advice: bool                     # style advice, worth no points
    count: int                       # submissions that made it (each counted once)
    submissions: tuple[str, ...]     # their names, sorted


@dataclass(frozen=True)
class GroupStat:
    """One test group across the graded submissions: how much of its points the class earned."""
    group: str                # the group key, e.g. "test_01_interface::test_layers"
    title: str                # readable: a test name without its " [params]"
    mean_fraction: float      # mean over graded submissions of score / max_score, in [0, 1]
    lost: int                 # graded submissions that lost points in it (students, not points)
    submissions: int          # graded submissions that ran it
    visibility: str = "visible"   # when the students see it (grader.result.Visibility)
    max_score: float = 0.0        # its points (the largest over the class)


@dataclass
class ClassSummary:
    """Everything the report and the terminal summary show, computed once from the rows."""
    total: int
    graded: int
    rejected: int
    errors: int                          # grader failures (and any unknown status): no score
    error_submissions: tuple[str, ...]   # their names, sorted: to be rerun
    max_score: float                     # the largest max_score of a scored row (0 when none)
    mean: float | None                   # over graded + rejected; None when none has a score
    median: float | None
    histogram: tuple[int, ...]           # BINS counts of graded + rejected, by fraction of max
    bugs: tuple[BugCount, ...]           # mistakes most common first, then advice
    weakest: tuple[GroupStat, ...]       # at most TOP_GROUPS groups that lost points, worst first
    lookalikes: tuple[tuple[str, ...], ...] = ()  # names (as shown) that read the same as another
    withheld: tuple[GroupStat, ...] = ()  # groups the students' pages leave out (hidden, after the due date)
    final: bool = False                  # mean, median and histogram are of the final scores (grader.term)

    def bin_labels(self) -> list[str]:
        """'0–10', '10–20', ... in points of max_score (in percent when there is no max)."""
        top = self.max_score if self.max_score > 0 else 100.0
        edges = [_num(top * i / BINS) for i in range(BINS + 1)]
        return [f"{edges[i]}–{edges[i + 1]}" for i in range(BINS)]

    @property
    def mistakes(self) -> tuple[BugCount, ...]:
        """The bugs that cost points (advice left out)."""
        return tuple(b for b in self.bugs if not b.advice)


# ------------------------------------------------------------------------------------------ gradebook

def write_gradebook(rows: list[Row], path: str | os.PathLike, standings: dict | None = None) -> None:
    """The gradebook CSV, one line per submission sorted by name, written atomically. With
    `standings` (grader.term.Standing by the row's key: a course's late policy or an adjustments
    file), the term's columns follow (grader.term.GRADEBOOK_COLUMNS); `score` stays the grader's."""
    from grader import term
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(GRADEBOOK_HEADER + (term.GRADEBOOK_COLUMNS if standings is not None else ()))
    for row in sorted(rows, key=lambda r: r.submission):
        extra = [] if standings is None else term.gradebook_cells(standings.get(row.key))
        if extra:
            extra[-1] = texts.spreadsheet_safe(extra[-1])  # the note, the instructor's own text (numbers stay numbers)
        writer.writerow([
            texts.spreadsheet_safe(row.submission),
            row.status,
            "" if row.score is None else _num(row.score),
            _num(row.max_score),
            ";".join(dict.fromkeys(row.bug_ids)),
            f"{row.duration_s:.1f}",
            texts.spreadsheet_safe("; ".join(row.bug_titles().values())),
            row.cluster,
            *extra,
        ])
    write_atomic(path, out.getvalue())


# -------------------------------------------------------------------------------------------- summary

def summarize(rows: list[Row], standings: dict | None = None) -> ClassSummary:
    """Counts, score statistics, histogram, bug counts and weakest test groups of a batch. With
    `standings` (grader.term.Standing by the row's key), the score statistics and the histogram are
    of the final scores (late penalty and adjustment applied), and the summary says so (`final`)."""
    scored = [r for r in rows if r.status in SCORED]
    errored = [r for r in rows if r.status not in SCORED]
    scores = [_counted(r, standings) for r in scored]
    groups = _group_stats([r for r in rows if r.status == "graded"])
    return ClassSummary(
        total=len(rows),
        graded=sum(r.status == "graded" for r in rows),
        rejected=sum(r.status == "rejected" for r in rows),
        errors=len(errored),
        error_submissions=tuple(sorted(r.submission for r in errored)),
        max_score=max((r.max_score for r in scored), default=0.0),
        mean=statistics.fmean(scores) if scores else None,
        median=statistics.median(scores) if scores else None,
        histogram=_histogram([(score, r.max_score) for score, r in zip(scores, scored)]),
        bugs=_bug_counts(rows),
        weakest=_weakest_groups(groups),
        lookalikes=_lookalikes(rows),
        withheld=tuple(g for g in groups if g.visibility != "visible"),
        final=standings is not None,
    )


def _lookalikes(rows: list[Row]) -> tuple[tuple[str, ...], ...]:
    """The submissions whose names read the same (grader.text.lookalikes), by their shown names:
    several students, or one student under several names, for the instructor to tell apart."""
    shown = {row.key or row.submission: row.submission for row in rows}
    return tuple(tuple(shown[raw] for raw in group) for group in texts.lookalikes(shown))


def _score(row: Row) -> float:
    """The score a scored row counts with: a rejection without a score counts as 0."""
    return float(row.score) if row.score is not None else 0.0


def _counted(row: Row, standings: dict | None) -> float:
    """The score a scored row counts with in the statistics: the grader's, or with `standings` its
    final score (a row without a standing, or without a final score, counts as it is graded)."""
    final = getattr((standings or {}).get(row.key), "final", None)
    return float(final) if final is not None else _score(row)


def _histogram(scores: list[tuple[float, float]]) -> tuple[int, ...]:
    """Counts per tenth of each (score, max score); a full score (or more, a bonus) lands in the last bin."""
    counts = [0] * BINS
    for score, most in scores:
        if most <= 0:
            continue
        index = math.floor(score * BINS / most + _EPS)
        counts[min(max(index, 0), BINS - 1)] += 1
    return tuple(counts)


def _bug_counts(rows: list[Row]) -> tuple[BugCount, ...]:
    """Each bug id with the submissions that made it: mistakes by count, then advice by count."""
    who: dict[str, set[str]] = {}
    meta: dict[str, dict] = {}
    for row in rows:
        for bug_id in set(row.bug_ids):
            who.setdefault(bug_id, set()).add(row.submission)
        for bug in _list(row.result, "bugs"):
            if isinstance(bug, dict) and bug.get("id") is not None:
                meta.setdefault(str(bug["id"]), bug)
    counts = [BugCount(id=bug_id,
                       title=str(meta.get(bug_id, {}).get("title") or bug_id),
                       fix=str(meta.get(bug_id, {}).get("fix") or ""),
                       advice=bool(meta.get(bug_id, {}).get("advice", False)),
                       count=len(names),
                       submissions=tuple(sorted(names)))
              for bug_id, names in who.items()]
    return tuple(sorted(counts, key=lambda b: (b.advice, -b.count, b.id)))


def _group_stats(graded: list[Row]) -> list[GroupStat]:
    """Each test group worth points, over the graded submissions: the share of its points earned."""
    fractions: dict[str, list[float]] = {}
    titles: dict[str, str] = {}
    shown: dict[str, str] = {}
    most_of: dict[str, float] = {}
    for row in graded:
        points: dict[str, list[float]] = {}
        for test in _list(row.result, "tests"):
            if not isinstance(test, dict):
                continue
            key = str(test.get("group") or test.get("id") or "")
            titles.setdefault(key, group_title(str(test.get("name") or key)))
            shown.setdefault(key, str(test.get("visibility") or "visible"))
            earned = points.setdefault(key, [0.0, 0.0])
            earned[0] += float(test.get("score") or 0.0)
            earned[1] += float(test.get("max_score") or 0.0)
        for key, (score, most) in points.items():
            if most > 0:  # advice-only groups are worth nothing
                fractions.setdefault(key, []).append(min(max(score / most, 0.0), 1.0))
                most_of[key] = max(most_of.get(key, 0.0), most)
    return [GroupStat(group=key, title=titles[key], mean_fraction=statistics.fmean(values),
                      lost=sum(v < 1.0 - _EPS for v in values), submissions=len(values),
                      visibility=shown[key], max_score=round(most_of[key], 9))
            for key, values in fractions.items()]


def _weakest_groups(stats: list[GroupStat]) -> tuple[GroupStat, ...]:
    """The test groups where graded submissions lost points, lowest mean fraction earned first."""
    weak = [s for s in stats if s.lost]
    return tuple(sorted(weak, key=lambda s: (s.mean_fraction, -s.lost, s.title))[:TOP_GROUPS])


def _list(result: dict | None, key: str) -> list:
    value = result.get(key) if isinstance(result, dict) else None
    return value if isinstance(value, list) else []


# ----------------------------------------------------------------------------------------------- HTML

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
    (grader.reportparts.ClassCode); `standings`: grader.term.Standing by row key, the term's
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


FINAL_BASIS = "final scores: the late policy and the adjustments applied"


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


# ------------------------------------------------------------------------------------------- terminal

_BLOCKS = "▁▂▃▄▅▆▇█"


def print_summary(summary: ClassSummary, console: Console, *, clusters=(), similar: int = 0,
                  released: tuple[str, ...] = ()) -> None:
    """A summary of at most 15 lines: counts, scores, histogram, top bugs, weakest groups, clusters of
    unexplained mistakes (`clusters`: grader.clusters.Cluster), similar pairs (`similar`: how many the
    report shows), groups the students do not see yet, errors; then a line for each group of
    submission names that read the same.

    Student text goes in as `Text`, never parsed as markup, so a name like "[red]x" prints as is."""
    if not summary.total:
        console.print("No submissions.")
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True, min_width=9)
    grid.add_column(no_wrap=True, overflow="ellipsis")
    s = summary
    grid.add_row("Class", f"{s.total} submission{'s' if s.total != 1 else ''}: {s.graded} graded, "
                          f"{s.rejected} rejected, {s.errors} error{'s' if s.errors != 1 else ''}")
    if s.mean is not None and s.median is not None:
        grid.add_row("Score", f"mean {_num(s.mean, 1)}, median {_num(s.median, 1)} "
                              f"of {_num(s.max_score)} (graded and rejected"
                              + (f"; {FINAL_BASIS})" if s.final else ")"))
        grid.add_row("Histogram", Text.assemble("0 ▕", (spark(s.histogram), "cyan"),
                                                f"▏ {_num(s.max_score or 100)}   ",
                                                (" ".join(map(str, s.histogram)), "dim")))
    for i, bug in enumerate(s.mistakes[:4]):
        grid.add_row("Top bugs" if i == 0 else "",
                     Text.assemble((f"{bug.count}×", "bold"), f" {bug.title} ",
                                   ("(named in the course file)" if is_course_bug(bug.id) else f"({bug.id})", "dim")))
    for i, g in enumerate(s.weakest[:3]):
        grid.add_row("Weakest" if i == 0 else "",
                     Text.assemble((f"{g.mean_fraction:>4.0%}", "bold"),
                                   f" earned, {g.lost} of {g.submissions} students lost points  {g.title}"))
    if clusters:
        unnamed = sum(not c.name for c in clusters)
        students = sum(c.size for c in clusters)
        grid.add_row("Clusters", f"{len(clusters)} unexplained mistake{'s' if len(clusters) != 1 else ''}, "
                                 f"{students} student{'s' if students != 1 else ''}, {unnamed} not named yet "
                                 "(report.html)")
    grid.add_row("Similar", f"{similar} pair{'s' if similar != 1 else ''} much alike" + (" (report.html)" if similar else ""))
    held = [g for g in s.withheld if g.visibility not in released]
    if held:
        grid.add_row("Not shown", f"{len(held)} group{'s' if len(held) != 1 else ''} off the students' pages "
                                  "until released: " + ", ".join(g.title for g in held))
    if s.errors:
        grid.add_row(Text("Errors", style="bold red"),
                     Text(f"{s.errors} to rerun: " + ", ".join(s.error_submissions), style="red"))
    console.print(grid)
    for group in s.lookalikes:
        console.print(Text.assemble(("Names that read the same", "bold yellow"), " (graded separately; check who "
                                    "handed in which): ", (" · ".join(group), "yellow")))


def spark(counts: tuple[int, ...] | list[int]) -> str:
    """The counts as one line of block characters; an empty bin is a '·'."""
    tallest = max(counts, default=0)
    return "".join("·" if not c else _BLOCKS[max(0, math.ceil(c / tallest * len(_BLOCKS)) - 1)]
                   for c in counts)


# ------------------------------------------------------------------------------------------- helpers

def _num(value: float | None, digits: int = POINT_DIGITS) -> str:
    """A number as people read points (grader.result.points): 24.0 -> '24', 66.6667 -> '66.67'."""
    return "" if value is None else readable(value, digits)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write text to a temp file in the target's folder, then rename it over the target."""
    target = Path(path)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # os.open with 0o666 keeps the user's umask, unlike mkstemp's private 0o600.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
