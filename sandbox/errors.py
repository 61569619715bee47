"""The project's error root, at the bottom of the dependency order so that every package may
raise under it: the host (grader/), the sandbox and the exercises. What reaches a user as a
message is a GraderError; each subclass says which kind of failure it is and carries its facts.

What the student's code does is not an error of the grader: sandbox.proxy's StudentCodeError and
WorkerFailure are how a test learns of it, and they end as that test's verdict, never as a fault.
"""
from __future__ import annotations


class GraderError(Exception):
    """Root of every error the grader raises on purpose."""
