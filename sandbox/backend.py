"""What every sandbox backend takes and gives back, and the registry that picks one by name."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from sandbox.contract import HarnessJob
from sandbox.limits import Limits

SCRIPT_NAME = "submission.py"


@dataclass(frozen=True)
class Job:
    """One submission to grade: the harness's job (built on the host from the exercise) and the
    script to run (a notebook is already converted)."""
    harness: HarnessJob
    source: bytes

    @property
    def limits(self) -> Limits:
        return self.harness.limits

    def to_harness(self, submission_path: str, **placed) -> dict:
        """The harness's job, for the submission where the launcher put it, as JSON-ready data."""
        return self.harness.at(submission_path, **placed).to_dict()


@dataclass(frozen=True)
class RunResult:
    """What came out of the sandbox: the harness's raw report, or why there is none."""
    report: dict | None
    duration_s: float
    failure: str | None = None      # set when there is no report: what went wrong
    log_tail: str = ""              # the end of the harness's stderr, for diagnosing grader faults

    @classmethod
    def of(cls, raw: bytes | None, duration_s: float, why_none: str, log_tail: str = "") -> RunResult:
        """The result of a run that gave `raw`: its report, or `why_none` when it is not one."""
        report = parse_report(raw)
        return cls(report, duration_s, None if report is not None else why_none, log_tail)


def parse_report(raw: bytes | None) -> dict | None:
    """The harness's report if `raw` is a JSON object, else None (nothing, a cut stream, garbage)."""
    try:
        report = json.loads(raw) if raw else None
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


class Sandbox(Protocol):
    name: str

    def run(self, job: Job) -> RunResult:
        """Grade the job; never raises for anything the submission does."""


class SandboxUnavailable(Exception):
    """The backend cannot run here at all (no engine, no image); the message says what to do."""


class UnknownSandbox(LookupError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown sandbox {name!r}; known: {', '.join(known)}")


def available() -> dict[str, type]:
    """Backends by name; a new backend is one module and one line here."""
    import os

    from sandbox.container import IMAGE_MARKER, ImageSandbox
    from sandbox.docker import DockerSandbox
    from sandbox.local import LocalSandbox
    found = {LocalSandbox.name: LocalSandbox, DockerSandbox.name: DockerSandbox}
    if os.path.exists(IMAGE_MARKER):  # inside the grader image: grade with its two users
        found[ImageSandbox.name] = ImageSandbox
    return found


def get(name: str) -> Sandbox:
    backends = available()
    if name not in backends:
        raise UnknownSandbox(name, sorted(backends))
    return backends[name]()
