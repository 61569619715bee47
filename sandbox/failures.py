"""What a test learns of the student's code through the proxy (sandbox.proxy): the code raised
(StudentCodeError), answered with something unusable (BadAnswer), or its worker stopped serving
(WorkerFailure); and the one fault that is the sandbox's own (WorkerSetupFailed). A test's verdict
tells them apart by their class (sandbox.pytest_plugin)."""
from __future__ import annotations

from sandbox.errors import GraderError
from sandbox.protocol import bounded


class StudentCodeError(GraderError):
    """The student's code raised an exception while serving a request."""

    def __init__(self, op: str, error: dict, where: str | None):
        self.op = op
        self.type = bounded(error.get("type", "Exception"), 200)
        self.message = bounded(error.get("message", ""))
        self.line = error.get("line") if isinstance(error.get("line"), int) else None
        self.where = where
        super().__init__(self.describe())

    def describe(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        hint = self.limit_hit()
        text += f" ({hint})" if hint else ""
        return f"{text}\n  at {self.where}" if self.where else text

    def limit_hit(self) -> str | None:
        """Which sandbox limit an exception most likely comes from, if any."""
        if self.type == "MemoryError" or "can't allocate memory" in self.message:
            return "the sandbox's memory limit was hit"
        if self.type == "BlockingIOError" or "Resource temporarily unavailable" in self.message \
                or "can't start new thread" in self.message:
            return "the sandbox's process-count limit was hit"
        if "File too large" in self.message:
            return "the sandbox's file-size limit was hit"
        if "C++ compiler" in self.message or self.type == "InvalidCxxCompiler":
            return ("torch.compile's default backend needs a C++ compiler, and this sandbox has none: "
                    "grade it where one is installed, or submit the layer without torch.compile")
        return None


class BadAnswer(StudentCodeError):
    """The student's code answered with something that is not a usable answer (a bool, integer or
    complex tensor where a floating one is due): that test fails, with what was wrong."""

    def __init__(self, op: str, message: str):
        super().__init__(op, {"type": "BadAnswer", "message": message}, None)

    def describe(self) -> str:
        return self.message


class WorkerFailure(GraderError):
    """The worker process stopped serving: a timeout, an exit, a crash, an output flood."""

    def __init__(self, kind: str, message: str):
        self.kind = kind  # "timeout" | "exit" | "flood" | "protocol" | "budget" | "setup"
        self.message = message
        super().__init__(message)


class WorkerSetupFailed(GraderError):
    """The sandbox could not set up the first worker before any of the student's code ran: the
    grader's failure (status error), never the student's."""
