"""The keys a grade is stored under, shared by the batch, the queue and the service: a rerun, a
redelivered task or a second upload with the same key is answered from what was stored.

- The run key: the bytes graded and everything that changes what the sandbox runs (the exercise's
  fingerprint, the grader's version, the sandbox, the time limit). Another one regrades.
- The score key: the run key and what changes only the score (a course file's points, visibility,
  advice costs and cluster names). Another one with the same run key rescores the stored run.
"""
from __future__ import annotations

import hashlib
import json

import exercise as exercises
from grader import __version__


def run_setting(exercise: str, sandbox: str, wall_s: float | None) -> str:
    """Everything but the file that changes what the sandbox runs (the exercise's own time limit,
    given or not, is one run)."""
    ex = exercises.get(exercise)
    limit = ex.limits.wall_s if wall_s is None else wall_s
    return json.dumps([ex.fingerprint(), __version__, sandbox, limit])


def score_setting(run: str, course=None) -> str:
    """The run's setting and the course values that change only the score."""
    return json.dumps([run, course.score_key() if course else None])


def upload_key(data: bytes, name: str, *, exercise: str, sandbox: str, time_limit: float | None) -> str:
    """An upload's key (the queue's grade id, the service's stored grade): the run key of its bytes,
    with its file name (the result names it, and its suffix says .py or .ipynb)."""
    key = grading_key(data, run_setting(exercise, sandbox, time_limit))
    return hashlib.sha256(f"{key}\0{name}".encode(errors="surrogatepass")).hexdigest()


def grading_key(content: bytes, setting: str, rejection: str = "") -> str:
    """The hash of what is graded (`content`, and why it was rejected before any sandbox ran) and of
    `setting` (run_setting or score_setting)."""
    digest = hashlib.sha256(content)
    digest.update(f"\0{setting}\0{rejection}".encode(errors="surrogatepass"))
    return digest.hexdigest()
