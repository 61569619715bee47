"""The project's error root. A student's mistake, a bad command line and a grader failure are
different types and reach the user differently."""
from __future__ import annotations


from sandbox.errors import GraderError

__all__ = ["GraderError", "SubmissionRejected", "SandboxFailure"]


class SubmissionRejected(GraderError):
    """The submission cannot be graded at all (it never reaches the sandbox)."""

    def __init__(self, reason: str, message: str, *, line: int | None = None, where: str | None = None):
        self.reason, self.line, self.where = reason, line, where
        self.message = message
        super().__init__(message)


class SandboxFailure(GraderError):
    """The sandbox or the harness failed: no score can be given."""

    def __init__(self, message: str, *, log: str = ""):
        self.message, self.log = message, log
        super().__init__(message)
