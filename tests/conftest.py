"""pytest's fixtures and hooks for the project's tests; the code the tests share is in
tests/support."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.grading import SUBMISSIONS, Batched, Graded, grade

# tests/plugins holds an exercise package that test_plugins.py installs; its own tests are the
# exercise's suite (run by the harness against a submission), not the project's.
collect_ignore = ["plugins"]


@pytest.fixture(scope="session")
def grade_cached():
    """Grade each file once per session; several tests may look at the same result."""
    cache: dict[tuple, Graded] = {}

    def run(path: Path, *extra: str) -> Graded:
        key = (str(path), extra)
        if key not in cache:
            cache[key] = grade(path, *extra)
        return cache[key]
    return run


@pytest.fixture(scope="session")
def corpus_graded(tmp_path_factory):
    """Every buggy and outside-the-catalog file of the corpus, graded once by one `grade batch` run
    in warm local sandboxes (as an instructor regrades a class): results by 'folder/name'."""
    root = tmp_path_factory.mktemp("corpus")
    for folder in ("buggy", "unknown"):
        for path in sorted((SUBMISSIONS / folder).glob("*.py")):
            (root / "class").mkdir(exist_ok=True)
            (root / "class" / f"{folder}__{path.name}").write_bytes(path.read_bytes())
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(root / "class"), "--out", str(root / "out"),
                           "--jobs", "2"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {}
    for result_file in (root / "out" / "results").glob("*.json"):
        result = json.loads(result_file.read_text())
        folder, name = result["submission"]["name"].split("__", 1)
        results[f"{folder}/{name}"] = Batched(result)
    return results


def pytest_collection_modifyitems(items):
    """The tiers: a test not marked `unit` is `e2e`, so the fast lane (`-m unit`) holds only the
    tests that say they run in this process."""
    for item in items:
        if item.get_closest_marker("unit") is None:
            item.add_marker(pytest.mark.e2e)


# The full run spreads its files over two pytest-xdist workers (scripts/test): each file is one unit
# of work, so a module's or a session's fixture (a corpus graded by one batch) is made once, on one
# worker; the files that share such a fixture go together, as one unit.
SHARED_FIXTURES = {"tests/test_grade_buggy.py": "corpus", "tests/test_diagnosis.py": "corpus"}

try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # pytest-xdist is a dev dependency: without it the suite runs in one process
    pass
else:
    class _FilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return SHARED_FIXTURES.get(file, file)

    def pytest_xdist_make_scheduler(config, log):
        return _FilesTogether(config, log)


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


def pytest_terminal_summary(terminalreporter):
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
