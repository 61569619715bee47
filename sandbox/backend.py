"""What every sandbox backend takes and gives back, and the contract it implements (Sandbox, Slot).
The implementations are named in sandbox.registry, the only module that imports them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from sandbox.contract import HarnessJob
from sandbox.errors import GraderError
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

    @property
    def warm_ups(self) -> tuple[str, ...]:
        """The exercise's warm-up sources (Entry.warmup), none where it has none: a cold grade runs
        them before it forks the student's zygote (sandbox.zygote.warm_up_from)."""
        return (self.harness.entry.warmup,) if self.harness.entry.warmup else ()

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



def parse_report(raw: bytes | None) -> dict | None:
    """The harness's report if `raw` is a JSON object, else None (nothing, a cut stream, garbage)."""
    try:
        report = json.loads(raw) if raw else None
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


class Slot(Protocol):
    """A sandbox kept for one grade after another (a batch's slot, a queue worker's): `start()`
    readies it (a warm server's start is not a submission's grading time), `run(job)` grades,
    `close()` stops it until the next start, `shutdown()` stops it for good, at once (a grade in
    flight fails, none starts again); `starts` counts the servers started."""
    starts: int
    contained: bool

    def start(self) -> None: ...

    def run(self, job: Job) -> RunResult: ...

    def close(self) -> None: ...

    def shutdown(self) -> None: ...


class Sandbox(Protocol):
    """A backend: where the harness runs. A new backend implements these four and is named in
    sandbox.registry; nothing else in the grader changes. `contained`: it has a file system of
    its own, where none of this machine's folders exist (so the host's private places need no
    hiding there)."""
    name: str
    contained: bool

    def check(self) -> None:
        """Raise SandboxUnavailable, saying what to do, when this backend cannot run here."""

    def weaknesses(self, *, serving: bool = False) -> list[str]:
        """What this backend cannot guarantee on this machine, a line each (empty: nothing): the
        commands that grade many students' code (a batch; with `serving`, a queue worker or the
        service, which run unattended next to other machines' secrets) refuse a weak sandbox."""

    def run(self, job: Job) -> RunResult:
        """Grade the job; never raises for anything the submission does."""

    def warm(self, prepare: list[dict]) -> Slot:
        """A slot of this backend, prepared for the exercises in `prepare` (their test packages
        and warm-up code); a backend with no warm form gives ColdSlot(self)."""

    def close(self) -> None:
        """Release what the backend holds (connections); runs already over are cleaned up."""


class ColdSlot:
    """A slot that is a cold backend: every grade starts from nothing (`grade batch --cold`)."""
    starts = 0

    def __init__(self, backend: Sandbox):
        self.backend = backend
        self.contained = backend.contained
        self._shut = False

    def start(self) -> None:
        if self._shut:
            raise SandboxUnavailable(f"the {self.backend.name} sandbox was shut down")

    def run(self, job: Job) -> RunResult:
        self.start()
        return self.backend.run(job)

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        self._shut = True


class SandboxUnavailable(GraderError):
    """The backend cannot run here at all (no engine, no image); the message says what to do."""
