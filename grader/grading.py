"""The core: grade one submission file and return a typed result. The CLI is a thin layer on this."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import exercise as exercises
import sandbox.backend as backends
from grader import __version__, render
from grader import submission as submissions
from grader.errors import SandboxFailure, SubmissionRejected
from grader.result import GradeResult, Status
from grader.scoring import ReportError, result_from_report

DEFAULT_SANDBOX = "local"


def grade_file(path: Path, *, exercise: str = exercises.DEFAULT, sandbox: str = DEFAULT_SANDBOX,
               wall_s: float | None = None, backend: backends.Sandbox | None = None,
               hidden: tuple[str, ...] = ()) -> GradeResult:
    """Grade one submission. Student mistakes become a result; a grader fault raises SandboxFailure.
    `backend`: a sandbox already running (a batch's warm one), else a new one named `sandbox`;
    `hidden`: more paths the student's code may not read (a batch's other submissions)."""
    started = time.monotonic()
    ex = exercises.get(exercise)
    limits = ex.limits if wall_s is None else dataclasses.replace(ex.limits, wall_s=wall_s)
    backend = backend or backends.get(sandbox)
    try:
        sub = submissions.read(path)
    except SubmissionRejected as rejected:
        return rejected_result(path, rejected.message, exercise=ex.name, sandbox=sandbox,
                               duration_s=time.monotonic() - started)
    run = backend.run(backends.Job(exercise=ex.name, source=sub.script, limits=limits,
                                   line_map=sub.line_map.to_list(), hidden=tuple(hidden)))
    if run.report is None:
        raise SandboxFailure(run.failure or "the sandbox gave no report", log=run.log_tail)
    try:
        result = result_from_report(run.report, submission=sub, exercise=ex, sandbox=sandbox,
                                    duration_s=time.monotonic() - started, grader_version=__version__)
    except ReportError as err:
        raise SandboxFailure(f"the harness's report is malformed: {err}", log=run.log_tail) from err
    return _with_feedback(result)


def rejected_result(path: Path, message: str, *, exercise: str, sandbox: str,
                    duration_s: float = 0.0) -> GradeResult:
    """The result of a submission that could not be graded at all: score 0, and why."""
    return _without_report(path, Status.REJECTED, 0.0, message, exercise, sandbox, duration_s)


def error_result(path: Path, message: str, *, exercise: str, sandbox: str) -> GradeResult:
    """The result recorded when the grader itself failed: status error, no score."""
    return _without_report(path, Status.ERROR, None, message, exercise, sandbox, 0.0)


def _without_report(path: Path, status: Status, score: float | None, message: str, exercise: str,
                    sandbox: str, duration_s: float) -> GradeResult:
    result = GradeResult(exercise=exercise, submission_name=path.name,
                         submission_sha256=_sha256_or_empty(path), status=status, score=score,
                         max_score=exercises.get(exercise).max_score, message=message,
                         duration_s=duration_s, environment=host_environment(sandbox))
    return _with_feedback(result)


SUBMISSION_SUFFIXES = (".py", ".ipynb")


def find_submission(folder: Path, *, exercise: str = exercises.DEFAULT) -> Path:
    """The one submission file in an upload folder (as platforms deliver them).

    A single .py or .ipynb is it, wherever it lies; among several, the one that defines the
    exercise's class. Raises SubmissionRejected when there is none, or no way to choose.
    """
    candidates = sorted(p for p in folder.rglob("*") if p.suffix in SUBMISSION_SUFFIXES and p.is_file()
                        and not any(part.startswith((".", "__")) for part in p.relative_to(folder).parts))
    if len(candidates) == 1:
        return candidates[0]
    listing = ", ".join(str(p.relative_to(folder)) for p in candidates[:10])
    if not candidates:
        seen = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())[:10]
        raise SubmissionRejected("no_file", "your upload has no .py or .ipynb file"
                                 + (f" (files found: {', '.join(seen)})" if seen else " (it is empty)"))
    class_name = exercises.get(exercise).entry.class_name
    defining = [p for p in candidates if _defines(p, class_name)]
    if len(defining) == 1:
        return defining[0]
    raise SubmissionRejected("ambiguous", f"your upload has {len(candidates)} .py/.ipynb files ({listing}) "
                             f"and {len(defining) or 'none'} of them define{'s' if len(defining) == 1 else ''} "
                             f"class {class_name}; upload exactly one file that does")


def _defines(path: Path, class_name: str) -> bool:
    try:
        return f"class {class_name}".encode() in path.read_bytes()[:5_000_000]
    except OSError:
        return False


def host_environment(sandbox: str) -> dict:
    """The environment block when no sandbox report exists: this machine's versions."""
    import platform
    from importlib import metadata
    try:
        torch_version = metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        torch_version = None
    return {"grader": __version__, "python": platform.python_version(), "torch": torch_version,
            "sandbox": sandbox}


def _with_feedback(result: GradeResult) -> GradeResult:
    return dataclasses.replace(result, feedback=render.plain_text(result))


def _sha256_or_empty(path: Path) -> str:
    import hashlib
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
