"""`grade batch` as an instructor runs it, and what its output folder holds."""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.shared import tally

SANDBOXES = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


@dataclass
class BatchRun:
    exit_code: int
    output: str
    out: Path

    def gradebook(self) -> dict[str, dict]:
        with open(self.out / "gradebook.csv", newline="") as f:
            return {row["submission"]: row for row in csv.DictReader(f)}

    def index(self) -> dict:
        return json.loads((self.out / "index.json").read_text())["submissions"]

    def result(self, key: str) -> dict:
        return json.loads((self.out / self.index()[key]["result_file"]).read_text())


# The batches of this session keep their temporary files here (TMPDIR): every process they start
# inherits it, which tells them from the grades that anything else on the machine runs meanwhile.
OWN_TMP = Path(tempfile.mkdtemp(prefix="batch-tests-"))
ENV = {**os.environ, "COLUMNS": "120", "TMPDIR": str(OWN_TMP)}


def batch(folder: Path, out: Path, *extra: str, timeout: float = 600, env: dict | None = None) -> BatchRun:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, env={**ENV, **(env or {})})
    tally("grade batch" + (" --queue" if "--queue" in extra else " --cold" if "--cold" in extra else ""),
          time.monotonic() - started)
    return BatchRun(proc.returncode, proc.stdout + proc.stderr, out)


def start_batch(folder: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)


# --- rescoring from stored runs, with no sandbox to be had

NO_SANDBOX = ("import os, sys, grader.pool as pool\n"
              "def refuse(*a, **k):\n"
              "    print('a sandbox was started', file=sys.stderr, flush=True)\n"
              "    os._exit(3)\n"
              "pool.Pool._new_slot = refuse\n"
              "from grader.cli import main\n"
              "sys.argv[0] = 'grade'\n"
              "main()\n")


def batch_without_sandbox(folder: Path, out: Path, *extra: str) -> BatchRun:
    """`grade batch` with every way to a sandbox cut: a grade that needs one fails the run."""
    proc = subprocess.run([sys.executable, "-c", NO_SANDBOX, "batch", str(folder), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300, env=ENV)
    return BatchRun(proc.returncode, proc.stdout + proc.stderr, out)


def section(report: str, heading: str) -> str:
    start = re.search(rf"<h2[^>]*>{heading}", report).start()
    end = report.find("<h2", start + 4)
    return report[start:end if end > 0 else None]
