"""The project's error root, at the bottom of the dependency order so that every package may
raise under it: the host (grader/), the sandbox and the exercises. What reaches a user as a
message is a GraderError; each subclass says which kind of failure it is and carries its facts.

Every exception class the project defines derives from it (tests/test_pure.py checks), those that
carry what the student's code did too: sandbox.failures' StudentCodeError and WorkerFailure, and the
protocol's errors, are how a test learns of it, and they end as that test's verdict (the pytest
plugin tells them apart by their class), never as a fault of the grader.
"""
from __future__ import annotations


class GraderError(Exception):
    """Root of every error the grader raises on purpose."""
