"""The trusted side of the sandbox: runs the exercise's pytest suite against a student worker.

    python -m sandbox.harness JOB.json REPORT_FD [--fork-zygote [--warm WARMUP.json]]   (JOB.json may be '-' for stdin)

The job names the exercise, the submission file and the limits. With --fork-zygote (the local
sandbox's cold grade) this process imports torch and forks the zygote before it reads the job: one
torch import serves both, and the zygote holds nothing of the job; with --warm it runs the
exercise's warm-up first (sandbox.zygote.warm_up_from), as a warm server does. The report goes to
REPORT_FD, a pipe the student's process never holds.
"""
from __future__ import annotations

import io
import json
import os
import platform
import sys
import time

IMPORTED = time.monotonic()  # before the harness's own imports

from typing import Any  # noqa: E402 -- after IMPORTED, which times these imports

from sandbox.contract import HarnessJob  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.errors import GraderError  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.limits import guard_harness, release_harness  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.phases import Clock, process_started  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.protocol import bounded  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.proxy import Student  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.zygote_client import Zygote  # noqa: E402 -- after IMPORTED, which times these imports
from sandbox.source import LineMap, python_lines  # noqa: E402 -- after IMPORTED, which times these imports

REPORT_SCHEMA = 1
REPORT_MARGIN_S = 10.0   # the student's code stops this long before the wall clock
ALARM_AFTER_S = 2.0      # then the harness's own alarm: the rest of the margin is for the report
# The zygote and its workers, threads included: torch's pools plus what the student may add.
ZYGOTE_PIDS = 128


class HarnessFault(GraderError):
    """The test suite itself could not run: a grader fault, reported as status error."""


def run(job: HarnessJob, forked: Zygote | None = None) -> dict:
    """Grade one submission inside the sandbox and return the raw report. `forked`: the zygote
    main() forked before it read the job."""
    started = time.monotonic()
    clock = Clock()
    python_started = process_started()
    if python_started is not None and python_started <= IMPORTED:  # not a fork of a warm server
        clock.add("harness: Python start", python_started, IMPORTED)
        clock.add("harness: its imports", IMPORTED, started)
    with clock.span("harness: zygote start"):
        if job.zygote is not None:  # started by the container's entry point or a warm server
            zygote = Zygote.attached(job.zygote.fd, ready=job.zygote.ready, notes=list(job.zygote.notes),
                                     capped=job.zygote.capped)
        elif forked is not None:
            zygote = forked
        else:
            zygote = Zygote.start(isolate=True, max_pids=ZYGOTE_PIDS)
    with clock.span("harness: torch import"):
        from sandbox.zygote import single_threaded_torch
        single_threaded_torch()
    tests_dir = tests_folder(job.tests)
    limits, line_map = job.limits, LineMap.from_list(list(job.line_map))
    # Stop calling the student's code early enough to report within the wall-clock limit.
    deadline = started + limits.wall_s - min(REPORT_MARGIN_S, limits.wall_s / 4)
    guard_harness(limits, alarm_at=deadline + min(ALARM_AFTER_S, limits.wall_s / 20))
    source = _read_source(job.submission)  # read once, before any of the student's code runs
    source_lines = python_lines(source)
    # The worker may read neither the exercise (tests, reference) nor other grades' scratch folders.
    import tempfile
    student = Student(zygote, path=job.submission, entry=job.entry, limits=limits, deadline=deadline,
                      scratch=job.scratch or None, locate=line_map.describe(source_lines), source=source,
                      source_lines=source_lines,
                      hidden=(os.path.dirname(tests_dir), tempfile.gettempdir(), *job.hidden))
    report: dict[str, Any] = {"schema": REPORT_SCHEMA, "exercise": job.exercise, "exercise_version": job.version,
              "environment": _environment(), "notes": list(zygote.notes)}
    try:
        with clock.span("worker: submission loaded"):
            loaded = student.load()
        report["notes"] += loaded.notes
        if not loaded.ok:
            report.update(status="rejected", rejection=_plain({"reason": loaded.reason, **loaded.detail}))
            return report
        report["status"] = "graded"
        with clock.span("pytest"):
            report["tests"], findings = _run_pytest(tests_dir, student, job.seed, clock)
        report["bugs"], report["diagnosis_note"] = findings.bugs, findings.note
        report["diagnosis_skipped"] = findings.skipped
        report["printed"] = student.printed()
        report["restarts"] = student.restarts
    finally:
        release_harness()
        student.close()
        zygote.close()
        report["duration_s"] = time.monotonic() - started
        clock.add("harness: workers closed", clock.spans[-1][2])  # the zygote's start is always a span
        report["phases"] = clock.to_list()
    return _bounded(report)


def tests_folder(package: str) -> str:
    """Where the exercise's test package lies, found by its dotted name wherever it is installed."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise HarnessFault(f"the exercise's test package {package} is not installed here")
    return list(spec.submodule_search_locations)[0]


def _run_pytest(tests_dir, student: Student, seed: str = "", clock: Clock | None = None):
    import pytest
    from pytest_jsonreport.plugin import JSONReport

    from sandbox.pytest_plugin import HarnessPlugin
    json_plugin = JSONReport()
    harness_plugin = HarnessPlugin(student, seed, clock)
    args = [str(tests_dir), "-q", "-p", "no:cacheprovider", "-p", "no:stepwise",
            "--rootdir", str(tests_dir), "-c", os.devnull, "--json-report-file=none",
            "-W", "ignore::DeprecationWarning", "--assert=plain",
            # these two plugins end the session with a full gc.collect(): 0.2 s of nothing here
            "-p", "no:unraisableexception", "-p", "no:threadexception",
            # no report of JUnit XML, and no log records in the JSON one: neither is read
            "-p", "no:junitxml", "--json-report-omit", "log",
            # the one plugin the grade needs, by name: no scan of every installed package's entry
            # points (PYTEST_DISABLE_PLUGIN_AUTOLOAD below) and no import of the ones it finds
            # (xdist, timeout...): about 0.17 s of CPU a grade
            "-p", "pytest_jsonreport.plugin",
            # a failed test's verdict is its metadata (sandbox.pytest_plugin): its traceback as
            # Python prints it, not pytest's long form, which parses the source of every frame
            "--tb=native"]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    output = io.StringIO()
    stdout, sys.stdout = sys.stdout, output  # pytest's progress lines; kept only to explain a fault
    try:
        code = pytest.main(args, plugins=[json_plugin, harness_plugin])
    finally:
        sys.stdout = stdout
    if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED,
                pytest.ExitCode.INTERRUPTED):
        raise HarnessFault(f"pytest ended with {pytest.ExitCode(code).name}: {output.getvalue()[-3000:]}")
    tests = []
    for entry in (json_plugin.report or {}).get("tests", []):
        grade = (entry.get("metadata") or {}).get("grade")
        if grade is None:
            grade = {"group": entry["nodeid"], "group_title": entry["nodeid"], "points": 0.0,
                     "status": "error", "feedback": "internal grader error: no verdict", "internal": True,
                     "bugs": [], "case": None}
        tests.append({"id": entry["nodeid"], **grade,
                      "duration_s": sum((entry.get(s) or {}).get("duration", 0.0)
                                        for s in ("setup", "call", "teardown"))})
    return tests, harness_plugin.collected


def _plain(value, depth: int = 0):
    """Only JSON's own types, with bounded strings: what the worker said goes into the report as data."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        return {str(k)[:100]: _plain(v, depth + 1) for k, v in list(value.items())[:50]}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value[:50]]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return str(value)[:2000]


def _bounded(value, depth: int = 0):
    """The report with every string and list cut to a size that cannot matter to a reader: much of
    it is text the student's code chose (messages, evidence), and a report over the backends'
    size limit would be thrown away."""
    if isinstance(value, dict):
        return {k: _bounded(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded(v, depth + 1) for v in value[:500]]
    if isinstance(value, str):
        return bounded(value, 8000)
    return value


def _read_source(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _environment() -> dict:
    import pytest
    import torch
    return {"python": platform.python_version(), "torch": torch.__version__.split("+")[0],
            "pytest": pytest.__version__}


def report_text(job: dict, forked: Zygote | None = None) -> str:
    """The report on `job` (a HarnessJob as a dict) as JSON text; a fault of the harness itself
    becomes a report of status error."""
    try:
        return json.dumps(run(HarnessJob.from_dict(job), forked))
    except Exception as err:  # the harness's last resort: report the fault instead of a traceback
        import traceback
        return json.dumps({"schema": REPORT_SCHEMA, "status": "error", "error": f"{type(err).__name__}: {err}",
                           "traceback": traceback.format_exc()})


def main() -> None:
    job_path, report_fd = sys.argv[1], int(sys.argv[2])
    forked = None
    if "--fork-zygote" in sys.argv[3:]:
        # One torch import for both: the zygote is a fork of this process, made before the job
        # (its seed) is read, in an environment the backend cut to what Python and torch need.
        from sandbox.zygote import single_threaded_torch
        single_threaded_torch()
        if "--warm" in sys.argv[3:]:
            # Torch's lazy set-up paid once, here, for this process's reference runs and every
            # worker of the zygote, instead of once in each (a correct file: 4.2 -> 3.5 CPU-s).
            from sandbox.zygote import warm_up_from
            warm_up_from(sys.argv[sys.argv.index("--warm") + 1])
        forked = Zygote.fork(max_pids=ZYGOTE_PIDS, preload=True)
    if job_path == "-":
        job = json.load(sys.stdin)
    else:
        with open(job_path) as f:
            job = json.load(f)
    text = report_text(job, forked)
    with os.fdopen(report_fd, "w") as out:
        out.write(text)


if __name__ == "__main__":
    main()
