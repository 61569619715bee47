"""The core: grade one submission file and return a typed result. The CLI is a thin layer on this."""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import exercise as exercises
import sandbox.registry as registry
from sandbox.backend import Job, Sandbox, SandboxUnavailable
from sandbox.phases import Clock, plain_spans
from grader import __version__, keys, render
from grader import submission as submissions
from grader.course import full_marks, time_limit
from grader.errors import SandboxFailure, SubmissionRejected
from grader.result import GradeResult, Status
from grader.scoring import ReportError, result_from_report

DEFAULT_SANDBOX = registry.DEFAULT
# The host's switch (its operator's environment, never a submission's) that grades with the kernel's
# layers alone, without the audit layer in the student's process (sandbox.audit): for the project's
# own tests that those layers hold where the audit would be got past.
KERNEL_LAYER_ONLY = "ATTENTION_GRADER_KERNEL_LAYER_ONLY"
# The host's limit on one call into the student's code, in seconds, below the exercise's own (its
# operator's environment too): the project's tests of what a call that never returns meets (the
# kill, the count of timed-out calls, the clean-up) wait 1 s per call where the exercise waits 4.
# Only lowered: a value above the exercise's limit, or not a number, changes nothing. The same for
# the import of the submission (IMPORT_LIMIT): an import that never ends meets its kill and its
# rejection at 2 s as at 20.
CALL_LIMIT = "ATTENTION_GRADER_CALL_LIMIT_S"
IMPORT_LIMIT = "ATTENTION_GRADER_IMPORT_LIMIT_S"
HOST_LIMIT_FLOOR_S = 0.5


def _host_limits(limits):
    """The exercise's limits with the host's switches above applied."""
    if os.environ.get(KERNEL_LAYER_ONLY) == "1":
        limits = dataclasses.replace(limits, audit=False)
    for variable, name in ((CALL_LIMIT, "call_s"), (IMPORT_LIMIT, "import_s")):
        try:
            seconds = float(os.environ[variable])
        except (KeyError, ValueError):
            continue
        if HOST_LIMIT_FLOOR_S <= seconds < getattr(limits, name):  # NaN compares false: unchanged
            limits = dataclasses.replace(limits, **{name: seconds})
    return limits


def grade(path: Path, *, exercise: str = exercises.DEFAULT, sandbox: str = DEFAULT_SANDBOX,
          wall_s: float | None = None, backend: Sandbox | None = None, hidden: tuple[str, ...] = (),
          on_log=None, course=None, data: bytes | None = None) -> GradeResult:
    """grade_file, where a grader fault is a result of status error (no score) instead of an
    exception: the one place where a fault becomes an `error` result. `on_log(text)` receives the
    sandbox's log tail of a fault, for a terminal that shows it."""
    try:
        return grade_file(path, exercise=exercise, sandbox=sandbox, wall_s=wall_s, backend=backend, hidden=hidden,
                          course=course, data=data)
    except SandboxFailure as failure:
        if failure.log and on_log is not None:
            on_log(failure.log)
        message = failure.message
    except SandboxUnavailable as failure:
        message = str(failure)
    except Exception as err:  # noqa: BLE001  (a grader bug costs this submission its grade, nothing more)
        message = f"internal error: {type(err).__name__}: {err}"
    return error_result(path, message, exercise=exercise, sandbox=sandbox, course=course)


def grade_file(path: Path, *, exercise: str = exercises.DEFAULT, sandbox: str = DEFAULT_SANDBOX,
               wall_s: float | None = None, backend: Sandbox | None = None,
               hidden: tuple[str, ...] = (), course=None, data: bytes | None = None) -> GradeResult:
    """Grade one submission. Student mistakes become a result; a grader fault raises SandboxFailure.
    `backend`: a sandbox already running (a batch's warm one), else a new one named `sandbox`;
    `hidden`: more paths the student's code may not read (a batch's other submissions);
    `course` (grader.course.Course): the instructor's points and visibility, and its time limit
    when `wall_s` is None; `data`: the file's bytes, when the caller read them already."""
    started = time.monotonic()
    backend = backend or registry.get(sandbox)
    if not backend.contained:  # a sandbox with a file system of its own has none of this machine's folders
        hidden = (*hidden, *private_places(path))
    ex = exercises.get(exercise)
    limits = _host_limits(dataclasses.replace(ex.limits, wall_s=time_limit(ex, wall_s, course)))
    try:
        sub = submissions.read(path, data=data)
    except SubmissionRejected as rejected:
        return rejected_result(path, rejected.message, exercise=ex.name, sandbox=sandbox,
                               duration_s=time.monotonic() - started, course=course)
    seed = keys.grade_seed(sub.script, ex.name, sha256=sub.script_sha256)  # held here, reaches the harness, never the student's code
    clock = Clock()
    clock.add("host: submission read", started)
    with clock.span("sandbox"):
        run = backend.run(Job(ex.job(limits, sub.line_map.to_list(), tuple(hidden), seed=seed), sub.script))
    if run.report is None:
        raise SandboxFailure(run.failure or "the sandbox gave no report", log=run.log_tail)
    try:
        scored_from = time.monotonic()
        result = rescore(path, run.report, exercise=exercise, sandbox=sandbox,
                         duration_s=scored_from - started, course=course, submission=sub)
    except ReportError as err:
        raise SandboxFailure(f"the harness's report is malformed: {err}", log=run.log_tail) from err
    clock.add("host: scored and rendered", scored_from)
    read, box, scored = clock.spans
    _, within, until = box
    inside = [[name, min(max(a, within), until), min(max(b, within), until)]  # the clock's ticks are coarse
              for name, a, b in plain_spans(run.report.get("phases"))]
    spans = [read, box, *inside, scored]
    return dataclasses.replace(result, phases=tuple((name, a - started, b - started) for name, a, b in spans))


def rescore(path: Path, report: dict, *, exercise: str, sandbox: str, duration_s: float, course=None,
            submission: submissions.Submission | None = None) -> GradeResult:
    """Score a raw report the sandbox gave for the file at `path` (now, or stored by a batch:
    no sandbox runs here). Raises ReportError for a malformed report."""
    sub = submission or submissions.read(path, compiles=False)  # the stored run shows it compiled
    return _with_feedback(result_from_report(report, submission=sub, exercise=exercises.get(exercise),
                                             sandbox=sandbox, duration_s=duration_s,
                                             grader_version=__version__, course=course))


# Top-level folders of the system itself: never hidden, the worker's libraries live there.
_SYSTEM = {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "opt", "proc", "sys", "dev", "run",
           "var", "boot", "snap", "nix"}


def private_places(path: Path) -> tuple[str, ...]:
    """The places the student's code may not read though the worker's user could: every top-level
    folder that is not the system's own (homes, /work, /srv, mounts: where classmates' files,
    results and the user's projects lie), and the folder the submission was graded from and the
    working folder wherever they are. The worker still reads Python's installation and the
    sandbox package within them (sandbox.confine keeps those)."""
    try:
        top = [os.path.join("/", name) for name in os.listdir("/") if name not in _SYSTEM]
    except OSError:
        top = []
    places = {*top, str(path.absolute().parent), str(path.resolve().parent), os.getcwd()}
    return tuple(sorted(p for p in places
                        if len(Path(p).parts) > 1 and not (len(Path(p).parts) == 2 and Path(p).parts[1] in _SYSTEM)))


def rejected_result(path: Path, message: str, *, exercise: str, sandbox: str,
                    duration_s: float = 0.0, course=None) -> GradeResult:
    """The result of a submission that could not be graded at all: score 0, and why."""
    return _without_report(path, Status.REJECTED, 0.0, message, exercise, sandbox, duration_s, course)


def error_result(path: Path, message: str, *, exercise: str, sandbox: str, course=None) -> GradeResult:
    """The result recorded when the grader itself failed: status error, no score."""
    return _without_report(path, Status.ERROR, None, message, exercise, sandbox, 0.0, course)


def _without_report(path: Path, status: Status, score: float | None, message: str, exercise: str,
                    sandbox: str, duration_s: float, course) -> GradeResult:
    ex = exercises.get(exercise)
    result = GradeResult(exercise=exercise, submission_name=path.name,
                         submission_sha256=_sha256_or_empty(path), status=status, score=score,
                         max_score=full_marks(ex, course), message=message,
                         duration_s=duration_s,
                         environment={**host_environment(sandbox), **(course.environment() if course else {})})
    return _with_feedback(result)


SUBMISSION_SUFFIXES = (".py", ".ipynb")
MAX_DEPTH = 16          # folders within an upload; a real project is a few deep
MAX_ENTRIES = 10_000    # files and folders in an upload


def find_submission(folder: Path, *, exercise: str = exercises.DEFAULT) -> Path:
    """The one submission file in an upload folder (as platforms deliver them).

    A single .py or .ipynb is it, wherever it lies; among several, the one that defines the
    exercise's class. Raises SubmissionRejected when there is none, or no way to choose.
    """
    files = upload_files(folder)
    candidates = sorted(p for p in files if p.suffix in SUBMISSION_SUFFIXES
                        and not any(part.startswith((".", "__")) for part in p.relative_to(folder).parts))
    if len(candidates) == 1:
        return candidates[0]
    listing = ", ".join(str(p.relative_to(folder)) for p in candidates[:10])
    if not candidates:
        seen = sorted(str(p.relative_to(folder)) for p in files)[:10]
        raise SubmissionRejected("no_file", "your upload has no .py or .ipynb file"
                                 + (f" (files found: {', '.join(seen)})" if seen else " (it is empty)"))
    entry = exercises.get(exercise).entry
    defining = [p for p in candidates if _defines(p, entry)]
    if len(defining) == 1:
        return defining[0]
    raise SubmissionRejected("ambiguous", f"your upload has {len(candidates)} .py/.ipynb files ({listing}) "
                             f"and {len(defining) or 'none'} of them define{'s' if len(defining) == 1 else ''} "
                             f"{entry.kind} {entry.name}; upload exactly one file that does")


def upload_files(folder: Path) -> list[Path]:
    """The regular files of an upload, found without recursion and within bounds (MAX_DEPTH,
    MAX_ENTRIES). A symbolic link is followed only when it stays inside the upload (a file the
    student linked to another of their own files); a link out of it, to a classmate's file or to
    anything else on this machine, rejects the upload, and its target is never read."""
    root = os.path.realpath(folder)
    found: list[Path] = []
    pending, entries = [(folder, 0)], 0
    while pending:
        here, depth = pending.pop()
        try:
            listing = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as err:
            raise SubmissionRejected("unreadable", f"cannot read the folder {here.relative_to(folder) or '.'}: "
                                     f"{err.strerror}") from err
        for entry in listing:
            entries += 1
            if entries > MAX_ENTRIES:
                raise SubmissionRejected("too_many_files", f"your upload has more than {MAX_ENTRIES:,} "
                                         "files and folders")
            path = here / entry.name
            if entry.is_symlink():
                target = os.path.realpath(path)
                if os.path.commonpath([root, target]) != root:
                    raise SubmissionRejected("link_outside", f"{path.relative_to(folder)} is a link that "
                                             "points outside your upload: upload the file itself")
                if os.path.isfile(target):
                    found.append(path)  # a folder linked inside the upload is listed where it lies
            elif entry.is_dir(follow_symlinks=False):
                if depth + 1 > MAX_DEPTH:
                    raise SubmissionRejected("too_deep", f"your upload has folders nested more than "
                                             f"{MAX_DEPTH} deep ({path.relative_to(folder).parts[0]}/...)")
                pending.append((path, depth + 1))
            elif entry.is_file(follow_symlinks=False):
                found.append(path)
    return found


def _defines(path: Path, entry) -> bool:
    try:
        with open(path, "rb") as f:
            return entry.defined_in(f.read(5_000_000))
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
    """The file's hash when it is one that could be graded (a regular file within the size limits,
    reached by no link); else empty."""
    import hashlib
    if path.is_symlink():
        return ""
    try:
        return hashlib.sha256(submissions.read_bytes(path)).hexdigest()
    except SubmissionRejected:
        return ""
