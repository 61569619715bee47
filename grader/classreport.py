"""What a batch regrade of a whole class produced, for the instructor.

Three views of the same rows: a gradebook CSV (one line per submission), a short terminal summary,
and the self-contained HTML class report (grader.classpage).
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

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader import text as texts
from grader.result import POINT_DIGITS, group_title, is_course_bug
from grader.result import points as readable

# `bugs` holds ids (for scripts), `bug_titles` the same bugs as people read them, `cluster` the id of an
# unexplained mistake's cluster (the class report's section of that id).
GRADEBOOK_HEADER = ("submission", "status", "score", "max_score", "bugs", "duration_s", "bug_titles", "cluster")
SCORED = ("graded", "rejected")     # statuses that carry a score (a rejection scores 0)
BINS = 10
TOP_GROUPS = 10
MAX_MESSAGE = 500                   # characters of a rejection/error message shown in the HTML

_EPS = 1e-9
FINAL_BASIS = "final scores: the late policy and the adjustments applied"


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
