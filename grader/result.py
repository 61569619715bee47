"""The typed result of a grade, and its native JSON form (the contract in DESIGN.md)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

SCHEMA = 1


class Status(str, enum.Enum):
    GRADED = "graded"        # the suite ran; the score stands
    REJECTED = "rejected"    # the submission could not be graded at all; score 0
    ERROR = "error"          # the grader or sandbox failed; no score may be recorded


class TestStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Bug:
    """A diagnosed mistake: what it is, why it is wrong, how to fix it."""
    id: str
    title: str
    explanation: str
    fix: str
    variant: str | None = None
    evidence: str = ""          # what this submission did that shows it
    advice: bool = False        # worth no points unless an instructor weights it
    affects: tuple[str, ...] = ()  # the test groups whose points it costs

    def to_dict(self) -> dict:
        d = {"id": self.id, "title": self.title, "explanation": self.explanation, "fix": self.fix,
             "evidence": self.evidence, "advice": self.advice}
        if self.variant:
            d["variant"] = self.variant
        return d


@dataclass(frozen=True)
class TestResult:
    """One test case: its points and what went wrong."""
    id: str
    name: str
    group: str
    group_title: str
    status: TestStatus
    score: float
    max_score: float
    feedback: str = ""
    bugs: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "group": self.group, "status": self.status.value,
                "score": round(self.score, 4), "max_score": round(self.max_score, 4),
                "feedback": self.feedback, "bugs": list(self.bugs)}


@dataclass(frozen=True)
class Group:
    """The tests of one test function, summed: a row of the terminal table."""
    key: str
    title: str
    score: float
    max_score: float
    tests: tuple[TestResult, ...]


@dataclass(frozen=True)
class GradeResult:
    """Everything a grade produced; renders to the terminal, to native JSON, to platform formats."""
    exercise: str
    submission_name: str
    submission_sha256: str
    status: Status
    score: float | None
    max_score: float
    tests: tuple[TestResult, ...] = ()
    bugs: tuple[Bug, ...] = ()
    message: str = ""            # why it was rejected, or what failed
    diagnosis: str = ""          # the output is wrong and no known mistake explains it: where
    notes: tuple[str, ...] = ()  # sandbox notes (limits not enforced, ...)
    printed: str = ""            # the start of what the student's code printed
    duration_s: float = 0.0
    environment: dict = field(default_factory=dict)
    feedback: str = ""           # the readable text, as shown on the terminal

    def groups(self) -> list[Group]:
        order: dict[str, list[TestResult]] = {}
        for test in self.tests:
            order.setdefault(test.group, []).append(test)
        return [Group(key, tests[0].group_title, sum(t.score for t in tests),
                      sum(t.max_score for t in tests), tuple(tests)) for key, tests in order.items()]

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "exercise": self.exercise,
            "submission": {"name": self.submission_name, "sha256": self.submission_sha256},
            "status": self.status.value,
            "score": None if self.score is None else round(self.score, 4),
            "max_score": self.max_score,
            "tests": [t.to_dict() for t in self.tests],
            "bugs": [b.to_dict() for b in self.bugs],
            "feedback": self.feedback,
            "message": self.message,
            "diagnosis": self.diagnosis,
            "notes": list(self.notes),
            "duration_s": round(self.duration_s, 3),
            "environment": self.environment,
        }
