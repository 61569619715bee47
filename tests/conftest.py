"""pytest's fixtures and hooks for the project's tests; the code the tests share is in
tests/support."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

# The tests that call torch in this process (the diagnosis's models, the kit's read-outs) do so on one
# thread, as the harness does (sandbox.zygote.single_threaded_torch): beside the other worker of the
# run, torch's second thread only waits (measured: the fixed-length diagnosis cases took 72 s with
# two threads and 10.5 s with one while another process kept one core busy; 47 s and 42 s alone).
# Set before torch is imported here; a process a test starts inherits it, as the sandbox sets its own.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests.support.grading import grade_once
from tests.support.corpus import BUGGY_AND_UNKNOWN, Corpus

# tests/plugins holds an exercise package that test_plugins.py installs; its own tests are the
# exercise's suite (run by the harness against a submission), not the project's.
collect_ignore = ["plugins"]


@pytest.fixture(scope="session")
def grade_cached():
    """`grade FILE` once per run (shared by the workers); several tests may look at the same result."""
    return grade_once


@pytest.fixture(scope="session")
def corpus_graded() -> Corpus:
    """Every buggy and outside-the-catalog file of the corpus, graded once per run by warm local
    batches (as an instructor regrades a class): result JSON by 'folder/name', graded on first use."""
    return BUGGY_AND_UNKNOWN


def pytest_collection_modifyitems(config, items):
    """The tiers: a test not marked `unit` is `e2e`, so the fast lane (`-m unit`) holds only the
    tests that say they run in this process. A worker of the full run also writes its units of
    work for the scheduler (below)."""
    for item in items:
        if item.get_closest_marker("unit") is None:
            item.add_marker(pytest.mark.e2e)
    lane = config.getoption("lane")
    if lane is not None:
        # The unit tier as the fast lane has it (its `slow` tests left out), and the lane's files
        # whole (their slow tests in).
        files = set(lane.split(",")) - {"none", "+docker"}
        kept = [i for i in items if i.nodeid.split("::")[0] in files
                and ("+docker" in lane or i.get_closest_marker("docker") is None)
                or i.get_closest_marker("unit") and not i.get_closest_marker("slow")]
        kept_ids = {id(i) for i in kept}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept_ids])
        items[:] = kept
    if hasattr(config, "workerinput"):
        _write_units(items)


# --- scheduling: units of work, heaviest first ----------------------------------------------------
# The full run spreads its tests over two pytest-xdist workers (scripts/test). A unit of work is one
# test, unless the test uses a fixture made once per module or class: then it goes with the other
# tests of its file that use one, so the fixture is made once, on one worker. (What a session
# fixture makes for many files is made once per run in tests/support/shared.py, whichever worker
# asks first.) Each worker writes the units it collected (with each test's tier) to the run's
# folder; the controller reads them and hands out the heaviest unit left to each worker that runs
# out of work, weighed by tests/durations.json (each test's seconds in the last full run, written
# with --durations-file) or, for a test it does not list, by its tier.
DURATIONS = Path(__file__).parent / "durations.json"
GUESS_S = {"unit": 0.05, "e2e": 6.0}


def _units_file() -> Path:
    from tests.support.shared import run_dir
    return run_dir() / "units.json"


def _write_units(items) -> None:
    units = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        grouped = info is not None and any(
            defs and defs[-1].scope in ("module", "class", "package") for defs in info.name2fixturedefs.values())
        units[item.nodeid] = {"unit": item.nodeid.split("::")[0] if grouped else item.nodeid,
                              "tier": "unit" if item.get_closest_marker("unit") else "e2e"}
    path = _units_file()
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_text(json.dumps(units))
    partial.replace(path)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist is a dev dependency: without it the suite runs in one process
    pass
else:
    class _HeaviestFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if not hasattr(self, "_units"):
                self._units = json.loads(_units_file().read_text())
                known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
                self._seconds = {n: known.get(n, GUESS_S[u["tier"]]) for n, u in self._units.items()}
            return self._units.get(nodeid, {"unit": nodeid})["unit"]

        def _assign_work_unit(self, node) -> None:
            heaviest = max(self.workqueue, key=lambda scope: sum(self._seconds.get(n, 1.0) for n in self.workqueue[scope]))
            self.workqueue.move_to_end(heaviest, last=False)
            super()._assign_work_unit(node)

    @pytest.hookimpl(optionalhook=True)  # `-p no:xdist` leaves the hook unknown: not an error
    def pytest_xdist_make_scheduler(config, log):
        return _HeaviestFirst(config, log)


def pytest_addoption(parser):
    parser.addoption("--lane", metavar="FILES",
                     help="the changed lane (tests/lanes.py): the unit tier (its slow tests left out) and "
                          "the tests of these test files (comma-separated), those marked docker only with "
                          "+docker; the rest is deselected")
    parser.addoption("--durations-file", metavar="PATH",
                     help="write each test's seconds (setup, call and teardown) to PATH as JSON, as "
                          "tests/durations.json keeps them for the scheduler")


def pytest_configure(config):
    """One id for the run, shared by the controller and its workers (tests/support/shared.py)."""
    from tests.support.shared import RUN_VARIABLE
    if not hasattr(config, "workerinput"):
        run = os.environ.setdefault(RUN_VARIABLE, os.urandom(8).hex())
        if hasattr(config.option, "testrunuid") and config.option.testrunuid is None:
            config.option.testrunuid = run
    config._grader_timing = {"started": time.monotonic(), "tests": {}, "workers": {}, "cpu": _cpu_times()}


def _cpu_times() -> tuple[int, int] | None:
    """(busy, all) jiffies of the machine's CPUs so far (/proc/stat), or None where there is none."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle and iowait
    return sum(fields) - idle, sum(fields)


def pytest_unconfigure(config):
    import shutil
    import sys

    from sandbox.tidy import remove_tree

    # The temporary folders of this process's queue and batch helpers (each process, a worker
    # included, made its own on import): their processes are gone by now.
    for helper in ("tests.support.queueing", "tests.support.batching"):
        module = sys.modules.get(helper)
        if module is not None:
            remove_tree(module.OWN_TMP)  # however deep a tree a test left in it (sandbox.tidy)
    if not hasattr(config, "workerinput"):
        from tests.support.shared import run_dir
        shutil.rmtree(run_dir(), ignore_errors=True)


def pytest_runtest_logreport(report):
    """Each test's seconds, and each worker's busy time (on the controller, from every worker)."""
    timing = getattr(_config, "_grader_timing", None) if _config else None
    if timing is None:
        return
    timing["tests"][report.nodeid] = timing["tests"].get(report.nodeid, 0.0) + report.duration
    worker = getattr(getattr(report, "node", None), "gateway", None)
    worker = worker.id if worker is not None else "main"
    timing["workers"][worker] = timing["workers"].get(worker, 0.0) + report.duration


_config = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    global _config
    _config = session.config


def _report_timing(terminalreporter, config) -> None:
    timing = config._grader_timing
    if hasattr(config, "workerinput") or not timing["tests"]:
        return
    wall = time.monotonic() - timing["started"]
    files: dict[str, float] = {}
    for nodeid, seconds in timing["tests"].items():
        files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0.0) + seconds
    write = terminalreporter.write_line
    terminalreporter.section("timing")
    write(f"wall time {wall:.0f} s; busy time by worker: "
          + ", ".join(f"{w} {s:.0f} s ({s / wall:.0%})" for w, s in sorted(timing["workers"].items())))
    now = _cpu_times()
    if now and timing["cpu"] and now[1] > timing["cpu"][1]:
        write(f"the machine's CPUs were busy {(now[0] - timing['cpu'][0]) / (now[1] - timing['cpu'][1]):.0%} "
              f"of the run ({os.cpu_count()} cores; anything else running counts too)")
    from tests.support.shared import tallied
    started = tallied()
    if started:
        write("processes the tests started through tests/support (count, seconds of wall time summed): "
              + "; ".join(f"{kind} {n} ({s:.0f} s)" for kind, (n, s) in sorted(started.items())))
    write("the 15 slowest files (seconds of setup, call and teardown, summed over their tests):")
    for name, seconds in sorted(files.items(), key=lambda kv: -kv[1])[:15]:
        write(f"  {seconds:8.1f}  {name}")
    out = config.getoption("durations_file")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps({k: round(v, 2) for k, v in sorted(timing["tests"].items())}, indent=0) + "\n")
        write(f"each test's seconds written to {out}")


class _StartedAProcess(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request, monkeypatch):
    """A test marked `unit` that starts a program, forks or spawns fails at that call: the mark is
    a promise the fast lane keeps, checked each time the test runs."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return

    def refuse(*args, **kwargs):
        raise _StartedAProcess(f"{request.node.nodeid} is marked unit but starts a process: mark it e2e instead")
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)
    yield


@pytest.fixture
def attack_outcome(record_property) -> dict:
    """This attack's row of the table printed at the end of the run: the test fills it in. It
    travels with the test's report (its user properties), so a worker's rows reach the table."""
    row: dict = {}
    record_property("attack", row)
    return row


def pytest_terminal_summary(terminalreporter, config):
    _report_timing(terminalreporter, config)
    rows = [value for reports in terminalreporter.stats.values() for report in reports
            if getattr(report, "when", None) == "call"
            for name, value in getattr(report, "user_properties", ()) if name == "attack" and value]
    if not rows:
        return
    write = terminalreporter.write_line
    terminalreporter.section("attack suite")
    write(f"{'attack':36} {'sandbox':8} {'status':9} {'score':>6} {'honest':>6} {'seconds':>7}  outcome")
    for o in sorted(rows, key=lambda o: (o["attack"], o["sandbox"])):
        score = "-" if o["score"] is None else f"{o['score']:g}"
        write(f"{o['attack']:36} {o['sandbox']:8} {str(o['status']):9} {score:>6} {o['honest']:>6g} "
              f"{o['seconds']:7.1f}  {o.get('outcome', 'FAILED')}")
