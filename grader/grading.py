"""The core: grade one submission file and return a typed result. The CLI is a thin layer on this."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import exercise as exercises
import sandbox.backend as backends
from grader import __version__, render
from grader.errors import SandboxFailure, SubmissionRejected
from grader.result import GradeResult, Status
from grader.scoring import ReportError, result_from_report
from grader import submission as submissions

DEFAULT_SANDBOX = "local"


def grade_file(path: Path, *, exercise: str = exercises.DEFAULT, sandbox: str = DEFAULT_SANDBOX,
               wall_s: float | None = None) -> GradeResult:
    """Grade one submission. Student mistakes become a result; a grader fault raises SandboxFailure."""
    started = time.monotonic()
    ex = exercises.get(exercise)
    limits = ex.limits if wall_s is None else dataclasses.replace(ex.limits, wall_s=wall_s)
    backend = backends.get(sandbox)
    try:
        sub = submissions.read(path)
    except SubmissionRejected as rejected:
        digest = _sha256_or_empty(path)
        result = GradeResult(exercise=ex.name, submission_name=path.name, submission_sha256=digest,
                             status=Status.REJECTED, score=0.0, max_score=ex.max_score,
                             message=rejected.message, duration_s=time.monotonic() - started,
                             environment=host_environment(sandbox))
        return _with_feedback(result)
    run = backend.run(backends.Job(exercise=ex.name, source=sub.script, limits=limits,
                                   line_map=sub.line_map.to_list()))
    if run.report is None:
        raise SandboxFailure(run.failure or "the sandbox gave no report", log=run.log_tail)
    try:
        result = result_from_report(run.report, submission=sub, exercise=ex, sandbox=sandbox,
                                    duration_s=time.monotonic() - started, grader_version=__version__)
    except ReportError as err:
        raise SandboxFailure(f"the harness's report is malformed: {err}", log=run.log_tail) from err
    return _with_feedback(result)


def error_result(path: Path, message: str, *, exercise: str, sandbox: str) -> GradeResult:
    """The result recorded when the grader itself failed: status error, no score."""
    result = GradeResult(exercise=exercise, submission_name=path.name,
                         submission_sha256=_sha256_or_empty(path), status=Status.ERROR, score=None,
                         max_score=exercises.get(exercise).max_score, message=message,
                         environment=host_environment(sandbox))
    return _with_feedback(result)


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
