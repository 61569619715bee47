"""The term's book-keeping for a graded class: the instructor's adjustments, the late policy, and
where a grade stands once both are applied.

An adjustments file (TOML) holds one table per student, named by the submission's entry in the
batch folder (its file or folder name, as the gradebook's `submission` column shows it):

    ["alice.py"]
    points = 2                  # added to the final score; negative takes points off
    note = "Bonus for the write-up"
    extension_days = 2          # the late policy's due date moves this many days for this student

Nothing of it reaches a result JSON or a run: it is read and applied on every `grade batch`, after
the grades (graded now, kept or rescored), so no regrade or rescore can lose it; the gradebook, the
student's page and lms.csv show it. The final score is the raw score, less the late penalty (at
most the raw score), plus the adjustment, and never below 0.
"""
from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from grader.course import MAX_POINTS, CourseError, LatePolicy, Locator, check_number, read_toml
from grader.result import points as readable
from grader import text

ADJUSTMENT_KEYS = ("points", "note", "extension_days")
MAX_EXTENSION_DAYS = 365.0
MAX_NOTE = 500                  # characters: a note is a line on a page, not a letter
DAY_S = 86400.0
# Gradescope's submission metadata, as its autograder (and a folder of its layout) holds it.
METADATA_FILE = "submission_metadata.json"


class AdjustmentsError(CourseError):
    """The adjustments file is not valid; the message names the file, the line and the key."""


@dataclass(frozen=True)
class Adjustment:
    """What the instructor decided for one student."""
    student: str
    points: float = 0.0
    note: str = ""
    extension_days: float = 0.0


@dataclass(frozen=True)
class Adjustments:
    name: str
    sha256: str
    by_student: dict[str, Adjustment]


def load_adjustments(path: Path, students: list[str]) -> Adjustments:
    """Read and check an adjustments file against the class's submissions (`students`: their
    entries in the batch folder); an unknown one is an error listing the valid ones."""
    doc, text, sha256 = read_toml(path, "adjustments file", AdjustmentsError)
    where = Locator(text, str(path))
    known = set(students)
    out = {}
    for student, table in doc.items():
        if not isinstance(table, dict):
            raise _error(where, (student,), f"{student} must be a table: [\"{student}\"] with points, note or "
                                            "extension_days under it")
        if student not in known:
            raise _error(where, (student,), f"[\"{student}\"] is no submission of this class; its submissions: "
                                            f"{', '.join(sorted(known)) or 'none'}")
        for key in table:
            if key not in ADJUSTMENT_KEYS:
                raise _error(where, (student, key), f"unknown key {key!r} in [\"{student}\"]; known: "
                                                    f"{', '.join(ADJUSTMENT_KEYS)}")
        numbers = {}
        for key, low, high in (("points", -MAX_POINTS, MAX_POINTS), ("extension_days", 0, MAX_EXTENSION_DAYS)):
            try:
                numbers[key] = check_number(table.get(key, 0), low=low, high=high, what=f"[\"{student}\"] {key}")
            except ValueError as err:
                raise _error(where, (student, key), str(err)) from None
        added, days = numbers["points"], numbers["extension_days"]
        note = table.get("note", "")
        if not isinstance(note, str) or len(note) > MAX_NOTE:
            raise _error(where, (student, "note"), f"[\"{student}\"] note must be a string of at most "
                                                   f"{MAX_NOTE} characters")
        out[student] = Adjustment(student, added, " ".join(note.split()), days)
    return Adjustments(str(path), sha256, out)


def _error(where: Locator, key: tuple[str, ...], message: str) -> AdjustmentsError:
    return AdjustmentsError(str(where.error(key, message)))


# --- when a submission was made -------------------------------------------------------------------

def submitted_at(entry: Path, graded: Path | None) -> datetime.datetime | None:
    """When a submission was made: Gradescope's `created_at` where its folder holds the platform's
    metadata, else the graded file's modification time (None when neither can be read)."""
    if entry.is_dir() and not entry.is_symlink():
        stamp = platform_time(entry)
        if stamp is not None:
            return stamp
    try:
        return datetime.datetime.fromtimestamp(os.stat(graded or entry, follow_symlinks=False).st_mtime,
                                               tz=datetime.UTC)
    except (OSError, TypeError):
        return None


def platform_time(folder: Path) -> datetime.datetime | None:
    """Gradescope's `created_at` from the `submission_metadata.json` in `folder` (None without one)."""
    try:
        meta = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
        stamp = datetime.datetime.fromisoformat(str(meta["created_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=datetime.UTC)


# --- where a grade stands -------------------------------------------------------------------------

@dataclass(frozen=True)
class Standing:
    """One student's grade with the term applied."""
    raw: float | None               # the grader's score (None: the grader failed, no score)
    max_score: float
    submitted: datetime.datetime | None = None
    late_days: int = 0
    penalty: float = 0.0            # points the late policy takes off
    adjustment: float = 0.0
    note: str = ""
    extension_days: float = 0.0

    @property
    def final(self) -> float | None:
        if self.raw is None:
            return None
        return round(max(0.0, self.raw - self.penalty + self.adjustment), 9)

    def lines(self) -> tuple[str, ...]:
        """What the student's page says of it (nothing when the term changes nothing)."""
        if self.raw is None or not (self.late_days or self.adjustment or self.note or self.extension_days):
            return ()
        out = []
        if self.extension_days:
            out.append(f"Extension: {readable(self.extension_days)} day(s).")
        if self.late_days:
            out.append(f"Submitted {self.late_days} day(s) late: {readable(self.penalty)} points off.")
        if self.adjustment:
            out.append(f"Adjusted by your instructor: {'+' if self.adjustment > 0 else ''}"
                       f"{readable(self.adjustment)} points.")
        if self.note:
            out.append(f"Note: {self.note}")
        final = self.final
        assert final is not None  # raw is not None here
        out.append(f"Final score: {readable(final)} / {readable(self.max_score)} "
                   f"(the grader's {readable(self.raw)}).")
        return tuple(out)


def standing(raw: float | None, max_score: float, *, submitted: datetime.datetime | None,
             late: LatePolicy | None, adjustment: Adjustment | None) -> Standing:
    """The grade with the late policy and the instructor's adjustment applied."""
    adjustment = adjustment or Adjustment("")
    days, penalty = 0, 0.0
    if late is not None and submitted is not None and raw is not None:
        overdue = (submitted - late.due).total_seconds() - adjustment.extension_days * DAY_S
        if overdue > late.grace_s:
            days = math.ceil(overdue / DAY_S)
            penalty = min(raw, max_score * min(late.cap, late.per_day * days) / 100)
    return Standing(raw, max_score, submitted, days, round(penalty, 9), adjustment.points, adjustment.note,
                    adjustment.extension_days)


# --- the gradebook's and the LMS's columns ----------------------------------------------------------

GRADEBOOK_COLUMNS = ("submitted_at", "late_days", "late_penalty", "adjustment", "final", "note")


def gradebook_cells(s: Standing | None) -> list[str]:
    """The term's columns of a gradebook line (GRADEBOOK_COLUMNS)."""
    if s is None:
        return [""] * len(GRADEBOOK_COLUMNS)
    stamp = s.submitted.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if s.submitted else ""
    return [stamp, str(s.late_days), readable(s.penalty), readable(s.adjustment),
            "" if s.final is None else readable(s.final), s.note]


# Canvas's gradebook CSV: the four columns that name a student and the section, then one column per
# assignment (a column Canvas does not know becomes a new assignment when imported).
LMS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def lms_csv(rows: list[tuple[str, Standing, dict[str, float]]], *, assignment: str, groups: list[str]) -> str:
    """lms.csv: a line per student (id: the submission's name without its suffix, in `SIS User ID`),
    the final score under `assignment`, then each group's raw points; no cell a formula."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*LMS_STUDENT_COLUMNS, assignment, *groups])
    for student, s, by_group in rows:
        writer.writerow([text.spreadsheet_safe(student), "", text.spreadsheet_safe(student), "", "",
                         "" if s.final is None else readable(s.final),
                         *("" if g not in by_group else readable(by_group[g]) for g in groups)])
    return out.getvalue()
