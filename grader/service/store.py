"""The service's grades: who asked for each, its state and result, and the results by grading key
that answer a repeated upload. In memory, and also in a folder when the service is given --store
(one JSON file per grade and per result, written atomically), so a restart keeps them.

A grade id is 128 random bits: on the student page it is the only thing that opens a feedback
page, so it must not be guessable.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import GraderError
from grader.result import JobState

PAGE_OWNER = "page"  # grades uploaded on the student page: no token sees them
MAX_REASON = 2000    # characters of a regrade request: a paragraph, not an essay
MAX_REQUESTS = 5     # per grade: a student asks again, not a script a thousand times
_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


@dataclass
class Grade:
    """One upload, as its owner sees it."""
    id: str
    owner: str                    # the token id, or PAGE_OWNER
    key: str                      # its grading key
    name: str                     # the upload's file name (as given: shown escaped, never trusted)
    exercise: str
    format: str = "native"
    callback_url: str | None = None
    job: str | None = None        # the engine's job, while it is graded
    state: str = JobState.QUEUED.value
    result: dict | None = None    # the native result, once done or failed
    created: float = field(default_factory=time.time)

    @property
    def finished(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class RegradeRequest:
    """A student's request that a grade be looked at again, for the instructor (`grade requests`)."""
    grade_id: str
    owner: str                    # the token id, or PAGE_OWNER
    name: str                     # the upload's file name
    status: str                   # the result's status and score when asked
    score: float | None
    max_score: float
    reason: str
    created: float = field(default_factory=time.time)


class RequestRefused(GraderError, ValueError):
    """A regrade request that cannot be recorded; the message says why (shown to the student)."""


class GradeStore:
    """Grades by id and stored results by grading key; `folder` (optional) makes them durable."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder
        self.grades: dict[str, Grade] = {}
        self.results: dict[str, dict] = {}
        self.requests: list[RegradeRequest] = []
        if folder is not None:
            for sub in ("grades", "results", "requests"):
                (folder / sub).mkdir(mode=0o700, parents=True, exist_ok=True)  # new: the service's alone
            self._load()

    def new_grade(self, **fields) -> Grade:
        grade = Grade(id=secrets.token_urlsafe(16), **fields)
        self.grades[grade.id] = grade
        self.save(grade)
        return grade

    def get(self, grade_id: str, owner: str) -> Grade | None:
        """The grade `grade_id` if `owner` made it; None for one that does not exist or is another's
        (the caller answers both the same way)."""
        grade = self.grades.get(grade_id)
        return grade if grade is not None and secrets.compare_digest(grade.owner, owner) else None

    def stored_result(self, key: str) -> dict | None:
        return self.results.get(key)

    def finish(self, grade: Grade, state: str, result: dict) -> None:
        """Record a grade's end; a result that is not a grader error answers later uploads too."""
        grade.state, grade.result, grade.job = state, result, None
        if result.get("status") != "error":
            self.results[grade.key] = result
            self._write(self.folder / "results" / f"{grade.key}.json" if self.folder else None, result)
        self.save(grade)

    def save(self, grade: Grade) -> None:
        self._write(self.folder / "grades" / f"{grade.id}.json" if self.folder else None, dataclasses.asdict(grade))

    def request_regrade(self, grade: Grade, reason: str) -> RegradeRequest:
        """Record a request to look at a finished grade again; RequestRefused for an empty or
        overlong reason, a grade not finished yet, or one asked about MAX_REQUESTS times."""
        reason = " ".join(str(reason).split())
        if not reason:
            raise RequestRefused("say what should be looked at again")
        if len(reason) > MAX_REASON:
            raise RequestRefused(f"a request is at most {MAX_REASON} characters (this one has {len(reason)})")
        if not grade.finished:
            raise RequestRefused("the grade is not finished yet")
        if sum(r.grade_id == grade.id for r in self.requests) >= MAX_REQUESTS:
            raise RequestRefused(f"this grade has {MAX_REQUESTS} requests already")
        result = grade.result or {}
        request = RegradeRequest(grade.id, grade.owner, grade.name, str(result.get("status", "")),
                                 result.get("score"), float(result.get("max_score") or 0), reason)
        self.requests.append(request)
        count = sum(r.grade_id == grade.id for r in self.requests)
        self._write(self.folder / "requests" / f"{grade.id}-{count}.json" if self.folder else None,
                    dataclasses.asdict(request))
        return request

    def unfinished(self) -> list[Grade]:
        return [g for g in self.grades.values() if not g.finished]

    # --- the folder -------------------------------------------------------------------------

    def _write(self, path: Path | None, document: dict) -> None:
        if path is None:
            return
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(document), encoding="utf-8")
        os.replace(temporary, path)

    def _load(self) -> None:
        """What an earlier run stored; an unreadable file is skipped, never the end of the start."""
        folder = self.folder
        assert folder is not None  # loaded only when there is a folder
        names = {f.name for f in dataclasses.fields(Grade)}
        for path in (folder / "grades").glob("*.json"):
            try:
                document = json.loads(path.read_text(encoding="utf-8"))
                grade = Grade(**{k: v for k, v in document.items() if k in names})
            except (OSError, ValueError, TypeError):
                continue
            if _ID.match(grade.id):
                self.grades[grade.id] = grade
        for path in (folder / "results").glob("*.json"):
            try:
                self.results[path.stem] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
        self.requests = load_requests(folder)


def load_requests(folder: Path) -> list[RegradeRequest]:
    """The regrade requests a store folder holds, oldest first (an unreadable file is skipped)."""
    names = {f.name for f in dataclasses.fields(RegradeRequest)}
    found = []
    for path in (folder / "requests").glob("*.json"):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            found.append(RegradeRequest(**{k: v for k, v in document.items() if k in names}))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(found, key=lambda r: r.created)
