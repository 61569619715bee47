"""Exercise plug-ins. Each declares an `EXERCISE` and holds its statement, reference, weighted
pytest suite and bug catalog; nothing outside the plug-in knows what an exercise checks.

Two places are searched: the sub-packages of this package (the built-in exercises), and the
Python entry-point group `attention_grader.exercises`, whose entries name an installed package's
`Exercise` object (`my_course.attention:EXERCISE`), so a course ships its own exercise with pip.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.contract import BugInfo, Entry, Group, HarnessJob
from sandbox.errors import GraderError
from sandbox.limits import Limits

ENTRY_POINT_GROUP = "attention_grader.exercises"


@dataclass(frozen=True)
class Exercise:
    """One gradable exercise, found by name: `package` is its dotted package, whose `tests`
    sub-package holds the weighted pytest suite (and lies in `directory`); `entry` is what the
    student submits; `rejections` rewords the texts for a submission that cannot be loaded
    (sandbox.contract.REJECTIONS)."""
    name: str
    version: str
    title: str
    entry: Entry
    directory: Path
    package: str
    limits: Limits = field(default_factory=Limits)
    max_score: float = 100.0
    rejections: tuple[tuple[str, str], ...] = ()

    @property
    def tests_dir(self) -> Path:
        return self.directory / "tests"

    @property
    def tests_package(self) -> str:
        return f"{self.package}.tests"

    def job(self, limits: Limits | None = None, line_map=(), hidden: tuple[str, ...] = (), seed: str = "") -> HarnessJob:
        """What the harness needs to grade a submission of this exercise; `seed`: the host's seed
        for the grade's draws (grader.keys.grade_seed)."""
        return HarnessJob(exercise=self.name, version=self.version, tests=self.tests_package, entry=self.entry,
                          limits=limits or self.limits, line_map=tuple(line_map), hidden=tuple(hidden), seed=seed)

    @property
    def groups(self) -> tuple[Group, ...]:
        """The exercise's test groups (its package's `groups.GROUPS`, which its tests are marked
        with): read without parsing or importing the tests. LookupError for an exercise without."""
        try:
            module = importlib.import_module(f"{self.package}.groups")
        except ModuleNotFoundError as err:
            if err.name != f"{self.package}.groups":
                raise
            raise LookupError(f"the exercise {self.name} declares no groups ({self.package}.groups.GROUPS)") from err
        return tuple(module.GROUPS)

    @property
    def catalog(self) -> dict[str, BugInfo]:
        """Every mistake this exercise's diagnosis can name: its package's `catalog.CATALOG` (none
        for an exercise without a catalog module), found through the package however it was
        installed."""
        name = f"{self.package}.catalog"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            return {}
        return dict(module.CATALOG)

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


class UnknownExercise(GraderError, LookupError):
    """No exercise plug-in has this name."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown exercise {name!r}; known: {', '.join(known) or 'none'}")


DEFAULT = "causal-self-attention"


class BadPlugin(GraderError):
    """An installed exercise plug-in that cannot be loaded; the message says which and why."""


_FOUND: dict[str, Exercise] | None = None


def all_exercises() -> dict[str, Exercise]:
    """Every exercise plug-in, built-in and installed, by name (found once per process)."""
    global _FOUND
    if _FOUND is None:
        found = {}
        for info in pkgutil.iter_modules(__path__):
            if info.ispkg:
                exercise = getattr(importlib.import_module(f"{__name__}.{info.name}"), "EXERCISE", None)
                if isinstance(exercise, Exercise):
                    found[exercise.name] = exercise
        for exercise in _installed():
            found.setdefault(exercise.name, exercise)  # a built-in name is never replaced
        _FOUND = found
    return _FOUND


def _installed() -> list[Exercise]:
    """The exercises that installed packages declare in the entry-point group."""
    from importlib import metadata
    exercises = []
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            exercise = point.load()
        except Exception as err:  # noqa: BLE001  (a broken plug-in is named, not a traceback)
            raise BadPlugin(f"the exercise plug-in {point.name} ({point.value}) cannot be loaded: "
                            f"{type(err).__name__}: {err}") from err
        if not isinstance(exercise, Exercise):
            raise BadPlugin(f"the exercise plug-in {point.name} ({point.value}) is a {type(exercise).__name__}, "
                            "not an exercise.Exercise")
        exercises.append(exercise)
    return exercises


def get(name: str = DEFAULT) -> Exercise:
    """The exercise called `name`; raises UnknownExercise."""
    exercises = all_exercises()
    if name not in exercises:
        raise UnknownExercise(name, sorted(exercises))
    return exercises[name]
