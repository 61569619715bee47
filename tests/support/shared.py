"""Results made once per test run and shared by every pytest-xdist worker.

A session fixture of pytest is made once per worker: with two workers, a corpus graded by a batch
was graded twice, and a file whose tests lean on it had to run whole on one worker. `once(name,
make)` makes a value once per run instead: the first worker to ask takes a file lock, makes it and
writes it as JSON in the run's folder; every other worker (or later test) that asks waits on the
lock and reads it. A value that failed to be made is stored as its error, so that every test that
needs it fails with that error instead of paying for the failure again.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

# One folder per test run: pytest-xdist gives its workers the run's id; the controller (or a run
# without xdist) makes one in conftest.pytest_configure, which its workers inherit.
RUN_VARIABLE = "GRADER_TEST_RUN"


def run_dir() -> Path:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.environ.setdefault(RUN_VARIABLE, os.urandom(8).hex())
    folder = Path(tempfile.gettempdir()) / f"grader-test-run-{run}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


class MadeElsewhereFailed(AssertionError):
    """The shared value could not be made (by this worker or another): its error, as it was."""


def once(name: str, make: Callable[[], Any]) -> Any:
    """The value `make()` returns (JSON-serialisable), made once per test run under this name."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:150]
    path = run_dir() / f"{stem}.json"
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            try:
                stored = {"value": make()}
            except BaseException as err:  # stored and raised again: every user fails with it
                path.write_text(json.dumps({"error": "".join(traceback.format_exception(err))[-6000:]}))
                raise
            path.write_text(json.dumps(stored))
    stored = json.loads(path.read_text())
    if "error" in stored:
        raise MadeElsewhereFailed(f"{name} could not be made in this run:\n{stored['error']}")
    return stored["value"]


TALLY = "tally.jsonl"


def tally(kind: str, seconds: float) -> None:
    """Count one process of this kind the tests started (a cold `grade FILE`, a `grade batch`) and
    its seconds, in the run's folder: the run's summary prints the counts (conftest.py), so that a
    run's cost can be read by what it starts, not only by test. One line appended per call: whole,
    whichever worker writes."""
    line = (json.dumps({"kind": kind, "seconds": round(seconds, 3)}) + "\n").encode()
    fd = os.open(run_dir() / TALLY, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def tallied() -> dict[str, tuple[int, float]]:
    """What tally() counted in this run: by kind, (count, seconds)."""
    counts: dict[str, tuple[int, float]] = {}
    try:
        lines = (run_dir() / TALLY).read_text().splitlines()
    except OSError:
        return counts
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        n, s = counts.get(entry["kind"], (0, 0.0))
        counts[entry["kind"]] = (n + 1, s + float(entry["seconds"]))
    return counts
