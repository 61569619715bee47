"""Grading as a user does: the real `grade` command on real files, and the corpus's paths."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.shared import once, tally

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
# Grades with the kernel's layers alone (grader.grading.KERNEL_LAYER_ONLY): for the tests of what the
# sandbox's kernel layers hold (processes, limits, kernel state) where the audit layer in the
# student's process would refuse the route first (tests/test_attacks.py grades those routes with it).
KERNEL_LAYER = {"ATTENTION_GRADER_KERNEL_LAYER_ONLY": "1"}
EXAMPLES = ROOT / "examples"
# Every grading container and volume these tests make, through any `grade` they run, carries this
# owner label (sandbox.docker.labels): a test that looks for leftovers sees only this session's,
# never those of other grades on the machine.
# Each pytest-xdist worker is a session of its own here: its label carries its name, and the
# programs it starts (which inherit both variables) keep that label.
OWNER = os.environ.setdefault("GRADER_OWNER", f"tests-{os.getpid()}-{os.urandom(4).hex()}")
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and not OWNER.endswith(f"-{_WORKER}"):
    OWNER = os.environ["GRADER_OWNER"] = f"{OWNER}-{_WORKER}"


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
    `uid`: run it as that ordinary user, from a root test: tests.support.as_user)."""
    from tests.support.as_user import command
    started = time.monotonic()
    argv = [sys.executable, "-m", "grader", str(path), "--json", "-", *extra]
    proc = subprocess.run(argv if uid is None else command(uid, *argv),
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
    result = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None
    tally("grade FILE" + (" --sandbox docker" if "docker" in extra else ""), time.monotonic() - started)
    return Graded(proc.returncode, result, proc.stderr, time.monotonic() - started)


def grade_once(path: Path, *extra: str) -> Graded:
    """`grade FILE` (the cold path) once per test run for these arguments, whichever worker asks
    first (tests.support.shared); several tests may look at the same result."""
    digest = hashlib.sha256("\0".join([str(path), *extra]).encode()).hexdigest()[:16]
    return Graded(**once(f"grade-{path.name}-{digest}", lambda: dataclasses.asdict(grade(path, *extra))))


@dataclass
class Batched:
    """One submission's result from a `grade batch` run (no terminal of its own)."""
    result: dict

    group, lost, full = Graded.group, Graded.lost, Graded.full
