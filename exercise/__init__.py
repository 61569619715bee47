"""Exercise plug-ins: each subpackage declares an `EXERCISE` and holds its statement, reference,
weighted pytest suite and bug catalog. Nothing outside this package knows what an exercise checks.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.limits import Limits
from sandbox.worker import EntrySpec


@dataclass(frozen=True)
class Exercise:
    """One gradable exercise, found by name."""
    name: str
    version: str
    title: str
    entry: EntrySpec
    directory: Path
    limits: Limits = field(default_factory=Limits)
    max_score: float = 100.0

    @property
    def tests_dir(self) -> Path:
        return self.directory / "tests"

    @property
    def statement(self) -> Path:
        return self.directory / "statement.md"

    def fingerprint(self) -> str:
        """A hash of the version and of every file of the exercise (tests, their points, reference,
        catalog): it changes whenever a grade could, so a batch knows what to regrade."""
        import hashlib
        digest = hashlib.sha256(f"{self.name}\0{self.version}\0".encode())
        for path in sorted(p for p in self.directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(f"{path.relative_to(self.directory).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()


class UnknownExercise(LookupError):
    """No exercise plug-in has this name."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown exercise {name!r}; known: {', '.join(known) or 'none'}")


DEFAULT = "causal-self-attention"


def all_exercises() -> dict[str, Exercise]:
    """Every exercise plug-in in this package, by name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            module = importlib.import_module(f"{__name__}.{info.name}")
            exercise = getattr(module, "EXERCISE", None)
            if isinstance(exercise, Exercise):
                found[exercise.name] = exercise
    return found


def get(name: str = DEFAULT) -> Exercise:
    """The exercise called `name`; raises UnknownExercise."""
    exercises = all_exercises()
    if name not in exercises:
        raise UnknownExercise(name, sorted(exercises))
    return exercises[name]
