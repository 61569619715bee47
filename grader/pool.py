"""A pool of sandboxes that grade one submission each at a time: what `grade batch`, a queue worker
and the HTTP service grade with. Thread-safe: any number of threads call grade(); each waits for a
free slot. A slot's sandbox is started on its first grade and kept warm for the next.

    with Pool(sandbox=registry.DEFAULT, slots=2) as pool:
        result = pool.grade(Path("submit.py"), exercise=NAME)
        result = pool.grade_bytes(data, "submit.py", exercise=NAME)

A grade never raises for what the submission or the sandbox does: a grader fault is a result of
status error (grading.grade).
"""
from __future__ import annotations

import os
import queue
import tempfile
import threading
from pathlib import Path
from typing import Protocol

import sandbox.registry as registry
from sandbox.backend import ColdSlot, SandboxUnavailable, Slot
from sandbox.tidy import remove_tree
from grader import grading
from grader.errors import GraderError
from grader.result import GradeResult

SAFE_NAME_CHARS = 120


class Grader(Protocol):
    """What a batch grades with: a Pool of this machine's sandboxes, or grader.queue's QueuePool."""

    @property
    def starts(self) -> int:
        """Sandbox servers started on this machine so far."""

    def grade(self, path: Path, *, exercise: str, wall_s: float | None = None, hidden: tuple[str, ...] = (),
              course=None, data: bytes | None = None) -> GradeResult:
        """The result of the submission at `path` (`data`: its bytes, if read already)."""

    def close(self) -> None:
        """Stop the sandboxes once their grades are over."""

    def shutdown(self) -> None:
        """Stop for good, now."""


class PoolClosed(GraderError):
    """The pool was shut down: no grade starts any more."""


class Pool:
    """`slots` sandboxes named `sandbox`, warm (a long-lived server each) unless `warm` is False."""

    def __init__(self, sandbox: str = grading.DEFAULT_SANDBOX, slots: int = 1, *, warm: bool = True,
                 hidden: tuple[str, ...] = ()):
        self.sandbox, self.slots, self.warm = sandbox, max(1, int(slots)), warm
        self.hidden = tuple(hidden)  # paths no submission graded here may read (a class's folder, OUT)
        self._free: queue.Queue = queue.Queue()
        self._all: list = []
        self._lock = threading.Lock()
        self._shut = threading.Event()
        for _ in range(self.slots):
            self._free.put(None)  # a slot whose sandbox is made on first use

    # --- grading ----------------------------------------------------------------------------

    def grade(self, path: Path, *, exercise: str, wall_s: float | None = None,
              hidden: tuple[str, ...] = (), course=None, data: bytes | None = None) -> GradeResult:
        """Grade the file at `path` (`data`: its bytes, if read already) in the next free slot;
        blocks until one is free."""
        slot = self._take()
        try:
            if slot is None:
                slot = self._new_slot()
            try:
                slot.start()  # a warm server's start is not this submission's grading time
            except SandboxUnavailable as err:
                return grading.error_result(path, str(err), exercise=exercise, sandbox=self.sandbox,
                                            course=course)
            return grading.grade(path, exercise=exercise, sandbox=self.sandbox, wall_s=wall_s, backend=slot,
                                 hidden=(*self.hidden, *hidden), course=course, data=data)
        finally:
            self._free.put(slot)

    def grade_bytes(self, data: bytes, name: str, *, exercise: str, wall_s: float | None = None) -> GradeResult:
        """Grade a submission given as bytes, under its file name (only the last part of it is
        used; its suffix says .py or .ipynb). The bytes are written to a private folder that no
        other grade can read, and removed afterwards."""
        folder = tempfile.mkdtemp(prefix="grade-upload-")
        try:
            path = Path(folder) / upload_name(name)
            path.write_bytes(data)
            return self.grade(path, exercise=exercise, wall_s=wall_s)
        finally:
            remove_tree(folder)

    # --- life cycle -------------------------------------------------------------------------

    def warm_up(self) -> int:
        """Start every slot's sandbox now instead of on its first grade (a queue worker waiting for
        work); grades meanwhile wait for their slot. A sandbox that does not start is left to its
        first grade, which reports it. How many slots started."""
        slots = [self._take() for _ in range(self.slots)]
        started = 0
        try:
            for i, slot in enumerate(slots):
                slots[i] = slot = self._new_slot() if slot is None else slot
                try:
                    slot.start()
                    started += 1
                except SandboxUnavailable:
                    pass
        finally:
            for slot in slots:
                self._free.put(slot)
        return started

    @property
    def starts(self) -> int:
        """Sandbox servers started so far, restarts included (0 for cold sandboxes)."""
        with self._lock:
            return sum(s.starts for s in self._all)

    def close(self) -> None:
        """Stop every slot's server once its grade is over; grades may still come (they start new ones)."""
        with self._lock:
            slots = list(self._all)
        for slot in slots:
            slot.close()

    def shutdown(self) -> None:
        """Stop for good, now: grades in flight end as errors, and no grade starts any more."""
        self._shut.set()
        with self._lock:
            slots = list(self._all)
        for slot in slots:
            try:
                slot.shutdown()
            except Exception:  # noqa: BLE001  (stopping anyway: one broken slot must not stop the rest)
                pass

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- slots ------------------------------------------------------------------------------

    def _take(self):
        while True:
            if self._shut.is_set():
                raise PoolClosed("the grading pool was shut down")
            try:
                return self._free.get(timeout=0.2)
            except queue.Empty:
                continue

    def _new_slot(self) -> Slot:
        backend = registry.get(self.sandbox)
        slot = backend.warm(warm_preparation()) if self.warm else ColdSlot(backend)
        with self._lock:
            self._all.append(slot)
        if self._shut.is_set():
            slot.shutdown()  # no server starts after a shutdown
        return slot


def warm_preparation() -> list[dict]:
    """What a warm sandbox prepares once for every exercise: its test package, its warm-up code."""
    import exercise as exercises
    return [{"tests": ex.tests_package, "warmup": ex.entry.warmup} for ex in exercises.all_exercises().values()]


def upload_name(name: str) -> str:
    """A safe file name for an upload called `name`: its last path part, without control
    characters, at most SAFE_NAME_CHARS long, keeping its suffix; 'submission.py' if nothing is left."""
    base = os.path.basename(str(name).replace("\\", "/"))
    base = "".join(c for c in base if c.isprintable() and c not in "/\0").strip().lstrip(".")
    stem, dot, suffix = base.rpartition(".")
    if not dot:
        stem, suffix = base, "py"
    stem = stem[:SAFE_NAME_CHARS] or "submission"
    return f"{stem}.{suffix[:16]}"


def failed_result(name: str, message: str, *, exercise: str, sandbox: str) -> dict:
    """The native result of a grade the engine lost (no result will come): status error, no score."""
    # Under /dev/null no file exists, so nothing on this machine is read for the (empty) hash.
    missing = Path("/dev/null") / upload_name(name)
    return grading.error_result(missing, message, exercise=exercise, sandbox=sandbox).to_dict()
