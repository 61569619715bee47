"""Helpers for the project's own tests: run the real `grade` CLI on real files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# tests/plugins holds an exercise package that test_plugins.py installs; its own tests are the
# exercise's suite (run by the harness against a submission), not the project's.
collect_ignore = ["plugins"]
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
# Grades with the kernel's layers alone (grader.grading.KERNEL_LAYER_ONLY): for the tests of what the
# sandbox's kernel layers hold (processes, limits, kernel state) where the audit layer in the
# student's process would refuse the route first (tests/test_attacks.py grades those routes with it).
KERNEL_LAYER = {"ATTENTION_GRADER_KERNEL_LAYER_ONLY": "1"}
EXAMPLES = ROOT / "examples"
# Every grading container and volume these tests make, through any `grade` they run, carries this
# owner label (sandbox.docker.labels): a test that looks for leftovers sees only this session's,
# never those of other grades on the machine.
OWNER = os.environ.setdefault("GRADER_OWNER", f"tests-{os.getpid()}-{os.urandom(4).hex()}")


def own_label() -> dict:
    """The Docker filter for this session's containers and volumes."""
    return {"label": f"attention-grader.owner={OWNER}"}


@dataclass
class Graded:
    """One run of `grade FILE --json -`."""
    exit_code: int
    result: dict | None
    terminal: str       # what a user sees (stderr, since the JSON went to stdout)
    seconds: float

    def group(self, name_part: str) -> tuple[float, float]:
        """(score, max) summed over the tests whose group contains name_part."""
        tests = [t for t in self.result["tests"] if name_part in t["group"]]
        assert tests, f"no test group matches {name_part!r}"
        return sum(t["score"] for t in tests), sum(t["max_score"] for t in tests)

    def lost(self, name_part: str) -> bool:
        score, most = self.group(name_part)
        return score < most

    def full(self, name_part: str) -> bool:
        score, most = self.group(name_part)
        return score == most


def grade(path: Path, *extra: str, timeout: float = 240, env: dict | None = None, uid: int | None = None) -> Graded:
    """Run the CLI the way a user does, with the JSON on stdout (`env`: variables to set for it;
    `uid`: run it as that ordinary user, from a root test: tests.as_user)."""
    from tests.as_user import command
    started = time.monotonic()
    argv = [sys.executable, "-m", "grader", str(path), "--json", "-", *extra]
    proc = subprocess.run(argv if uid is None else command(uid, *argv),
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
    result = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
    return Graded(proc.returncode, result, proc.stderr, time.monotonic() - started)


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


@dataclass
class Batched:
    """One submission's result from a `grade batch` run (no terminal of its own)."""
    result: dict

    group, lost, full = Graded.group, Graded.lost, Graded.full


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


_ATTACK_OUTCOMES: list[dict] = []


@pytest.fixture(scope="session")
def attack_outcomes() -> list[dict]:
    """Each attack's result, for the table printed at the end of the run."""
    return _ATTACK_OUTCOMES


def pytest_terminal_summary(terminalreporter):
    if not _ATTACK_OUTCOMES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("attack suite")
    write(f"{'attack':36} {'sandbox':8} {'status':9} {'score':>6} {'honest':>6} {'seconds':>7}  outcome")
    for o in _ATTACK_OUTCOMES:
        score = "-" if o["score"] is None else f"{o['score']:g}"
        write(f"{o['attack']:36} {o['sandbox']:8} {str(o['status']):9} {score:>6} {o['honest']:>6g} "
              f"{o['seconds']:7.1f}  {o.get('outcome', 'FAILED')}")
