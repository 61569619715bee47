"""The keys a grade is stored under, shared by the batch, the queue and the service: a rerun, a
redelivered task or a second upload with the same key is answered from what was stored.

- The run key: the bytes graded and everything that changes what the sandbox runs (the exercise's
  fingerprint, the grader's version, the sandbox, the time limit). Another one regrades.
- The score key: the run key and what changes only the score (a course file's points, visibility,
  advice costs and cluster names). Another one with the same run key rescores the stored run.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

import exercise as exercises
from grader import __version__
from grader.course import time_limit


def run_fingerprint(exercise: str, sandbox: str, wall_s: float | None) -> str:
    """Everything but the file that changes what the sandbox runs (the exercise's own time limit,
    given or not, is one run)."""
    return json.dumps([exercises.get(exercise).fingerprint(), __version__, sandbox, time_limit(exercise, wall_s)])


def score_fingerprint(run: str, course=None) -> str:
    """The run's fingerprint and the course values that change only the score."""
    return json.dumps([run, course.score_key() if course else None])


def upload_key(data: bytes, name: str, *, exercise: str, sandbox: str, time_limit: float | None) -> str:
    """An upload's key (the queue's grade id, the service's stored grade): the run key of its bytes,
    with its file name (the result names it, and its suffix says .py or .ipynb)."""
    key = grading_key(data, run_fingerprint(exercise, sandbox, time_limit))
    return hashlib.sha256(f"{key}\0{name}".encode(errors="surrogatepass")).hexdigest()


def grading_key(content: bytes, fingerprint: str, rejection: str = "") -> str:
    """The hash of what is graded (`content`, and why it was rejected before any sandbox ran) and of
    `fingerprint` (run_fingerprint or score_fingerprint)."""
    digest = hashlib.sha256(content)
    digest.update(f"\0{fingerprint}\0{rejection}".encode(errors="surrogatepass"))
    return digest.hexdigest()


# The seed of a grade's draws (sandbox.kit.Draws: every input, shape order and weight the tests
# use) is an HMAC of the submission's bytes under a key only the host holds: the same bytes are
# graded with the same draws (a regrade reproduces the grade), and the student's code, which never
# sees the key or the seed, cannot tell which inputs are the tests'. The key comes from
# $ATTENTION_GRADER_SEED_KEY when set (machines that must grade alike, e.g. a queue's workers,
# share it), else from a file in the user's config folder, made with a random key on first use.
SEED_KEY_ENV = "ATTENTION_GRADER_SEED_KEY"


def seed_key_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "attention-grader" / "seed.key"


def seed_key() -> bytes:
    """The host's key for grade seeds: $ATTENTION_GRADER_SEED_KEY, else seed_key_file() (created
    readable by this user only, with 32 random bytes, the first time)."""
    given = os.environ.get(SEED_KEY_ENV)
    if given:
        return given.encode()
    path = seed_key_file()
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = path.with_name(f".seed.key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    try:
        os.link(fresh, path)  # a key another process made first wins: every grade uses one key
    except FileExistsError:
        pass
    finally:
        os.unlink(fresh)
    return path.read_bytes().strip()


def grade_seed(content: bytes, exercise: str, *, sha256: str | None = None) -> str:
    """The seed of the draws for grading `content` as `exercise`: HMAC-SHA256 under seed_key() of
    the exercise's name and the bytes' SHA-256 (`sha256`: that hash, when the caller has it)."""
    message = f"{exercise}\0{sha256 or hashlib.sha256(content).hexdigest()}".encode()
    return hmac.new(seed_key(), message, hashlib.sha256).hexdigest()
