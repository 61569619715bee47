"""Rendering a GradeResult as readable text: a table of test groups, then what went wrong."""
from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console
from rich.console import Group as RichGroup
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from grader.result import GradeResult, Status, TestStatus, Visibility, out_of, points

MAX_OTHER_CASES = 6
# How a group that students do not see yet is marked where the instructor reads (terminal, class report).
WITHHELD: dict[str, str] = {Visibility.HIDDEN: "hidden from students", Visibility.AFTER_DUE_DATE: "shown to students after the due date"}

def build(result: GradeResult) -> RichGroup:
    """The renderable shown on the terminal and stored, as plain text, in the JSON `feedback`."""
    parts: list = [Text.assemble((f"{result.exercise}", "bold"), f" · {result.submission_name}",
                                 (f" · {result.environment.get('sandbox', '?')} sandbox, "
                                  f"{result.duration_s:.1f} s", "dim"))]
    if result.status is Status.REJECTED:
        parts += [Text.assemble(("REJECTED ", "bold red"), result.message),
                  Text(f"Score: 0 / {points(result.max_score)} (the submission could not be graded)")]
    elif result.status is Status.ERROR:
        parts += [Text.assemble(("GRADER ERROR ", "bold magenta"), result.message),
                  Text("No score was recorded: this is a fault of the grader, not of your code.")]
    else:
        parts += [*_diagnosis(result), _table(result), *_failures(result)]
    if result.notes:
        parts.append(Text("Sandbox notes: " + "; ".join(result.notes), style="dim"))
    return RichGroup(*parts)


def _diagnosis(result: GradeResult) -> list:
    """One short paragraph per diagnosed bug, before the table: the part a student reads first."""
    parts: list = []
    for bug in result.bugs:
        kind = "Advice" if bug.advice else "Bug"
        body = Text.assemble((f"{kind}: {bug.title}", "bold yellow" if bug.advice else "bold red"),
                             (f"  [{bug.label}]" if bug.label else "", "dim"), "\n",
                             f"{bug.explanation}\n", ("Fix: ", "bold"), bug.fix)
        if bug.evidence:
            body.append(f"\nSeen here: {bug.evidence}", style="dim")
        parts.append(body)
    if result.diagnosis:
        parts.append(Text.assemble(("No known mistake matches: ", "bold"), result.diagnosis))
    return parts + [Text("")] if parts else []


def _table(result: GradeResult) -> Table:
    table = Table(show_edge=False, pad_edge=False, box=None, padding=(0, 1))
    table.add_column("", width=1)
    table.add_column("Test group")
    table.add_column("Points", justify="right")
    for group in result.groups():
        if group.max_score == 0 and group.score >= 0:
            continue  # advice: shown with the bugs above, worth no points
        if group.max_score == 0:  # a course's deduction for advice it gives a cost
            table.add_row(Text("−", style="red"), Text(group.title), points(group.score))
            continue
        ok = group.score >= group.max_score - 1e-9
        mark = Text("✓", style="green") if ok else Text("✗", style="red")
        title = Text(group.title)
        if group.visibility is not Visibility.VISIBLE:  # the instructor's view: the students' pages leave it out
            title.append(f"  ({WITHHELD[group.visibility]})", style="magenta")
        table.add_row(mark, title, out_of(group.score, group.max_score))
    table.add_section()
    label = "Score on the tests shown" if result.withheld else "Score"
    assert result.score is not None  # graded: only a grader error has no score
    table.add_row("", Text(label, style="bold"),
                  Text(out_of(result.score, result.max_score), style="bold"))
    if result.withheld:
        table.add_row("", Text(result.withheld, style="dim"), "")
    return table


@dataclass(frozen=True)
class Failure:
    """One entry of "what went wrong" (the terminal's, the feedback pages'): the failing groups it
    covers, each with its failed cases (several groups when one failure repeats in all their
    failing cases: said once), which case is shown and how it ended, its feedback, and the other
    failing cases by name."""
    groups: tuple
    case: str
    how: str
    feedback: str
    others: str


def failures(result: GradeResult) -> list[Failure]:
    """What went wrong, group by group. A failure that repeats in every failing case (of one
    group, or of several: an exception in forward fails nearly every test alike) is said once,
    under the groups it fails."""
    failing = [(g, f) for g in result.groups() if g.max_score > 0
               and (f := [t for t in g.tests if t.status is not TestStatus.PASSED])]
    alike: dict[tuple, list] = {}
    for group, failed in failing:
        if len({(t.status, t.feedback) for t in failed}) == 1:
            alike.setdefault((failed[0].status, failed[0].feedback), []).append((group, failed))
    found, said = [], set()
    for group, failed in failing:
        first = failed[0]
        same = alike.get((first.status, first.feedback), [])
        if (group, failed) in same and sum(len(f) for _, f in same) > 1:
            if id(same) in said:
                continue
            said.add(id(same))
            cases = sum(len(f) for _, f in same)
            where = f" of these {len(same)} test groups" if len(same) > 1 else ""
            found.append(Failure(tuple((g, tuple(f)) for g, f in same), f"the same error in all {cases} failing "
                                 f"cases{where}", status_label(first), first.feedback or "(no details)", ""))
            continue
        # The first failure in full; the other failing cases by name (the JSON has each in full).
        found.append(Failure(((group, tuple(failed)),), case_name(first, group.title), status_label(first),
                             first.feedback or "(no details)", also_failing(failed, group.title)))
    return found


def _failures(result: GradeResult) -> list:
    items = failures(result)
    parts: list = [Text("\nWhat went wrong", style="bold")] if items else []
    for failure in items:
        for group, failed in failure.groups:
            parts.append(Text.assemble(("✗ ", "red"), (group.title, "bold"),
                                       f"  ({len(failed)} of {len(group.tests)} cases)"))
        body = Text(f"{failure.case} — {failure.how}\n", style="dim")
        body.append(failure.feedback)
        parts.append(Padding(body, (0, 0, 0, 4)))
        if failure.others:
            parts.append(Padding(Text(f"also failing: {failure.others}", style="dim"), (0, 0, 0, 4)))
    return parts


def also_failing(failed, group_title: str) -> str:
    """The failed cases after the first, by name (at most MAX_OTHER_CASES); '' when there are none."""
    others = [case_name(t, group_title) for t in failed[1:]]
    return ", ".join(others[:MAX_OTHER_CASES]) + (", ..." if len(others) > MAX_OTHER_CASES else "")


def case_name(test, group_title: str) -> str:
    """A case's name within its group ('[dim24-h4]'), or 'the test' for a group of one."""
    return test.name[len(group_title):].strip() or "the test"


def status_label(test) -> str:
    """How a test ended, in a few words (the terminal's and the platforms' test lines)."""
    return {TestStatus.FAILED: "wrong", TestStatus.ERROR: "your code raised an error",
            TestStatus.TIMEOUT: "timed out"}.get(test.status, test.status.value)


def plain_text(result: GradeResult, *, width: int = 100) -> str:
    """The same text without colours, for the JSON `feedback` field."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, color_system=None, highlight=False,
            emoji=False).print(build(result))
    return buffer.getvalue()


def profile(result: GradeResult) -> Table:
    """Where the grade's time went (`grade --profile`): each phase, when it started and how long it
    took, indented under the phase it lies within."""
    table = Table(title="Where the time went", title_justify="left", box=None, pad_edge=False)
    table.add_column("Phase")
    table.add_column("From", justify="right")
    table.add_column("Took", justify="right")
    open_spans: list[float] = []  # ends of the spans the current one lies within
    for name, start, end in sorted(result.phases, key=lambda p: (p[1], -p[2])):
        while open_spans and start >= open_spans[-1] - 1e-4:
            open_spans.pop()
        table.add_row(Text("  " * len(open_spans) + name), f"{start:.2f} s", f"{end - start:.2f} s")
        open_spans.append(end)
    table.add_row(Text("total", style="bold"), "", f"{max((p[2] for p in result.phases), default=0.0):.2f} s")
    return table
