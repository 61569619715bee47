"""Where a grade's time goes: named spans on the machine's monotonic clock.

Both sides of the boundary keep one: the host (its start, the sandbox's start, the report) and the
harness (its imports, the worker's load, collection, each test file, the diagnosis). CLOCK_MONOTONIC
is one clock for every process of a kernel, containers included, so the host can put the harness's
spans on its own time line. The spans are the grader's own measurements: they decide nothing.
"""
from __future__ import annotations

import contextlib
import os
import time


def process_started() -> float | None:
    """When this process started, on the monotonic clock (Linux: from /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat(5): start time after boot, in clock ticks
        since_boot = ticks / os.sysconf("SC_CLK_TCK")
        now_boot, now_mono = time.clock_gettime(time.CLOCK_BOOTTIME), time.monotonic()
        return now_mono - (now_boot - since_boot)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class Clock:
    """Spans [name, start, end] in monotonic seconds; `to_list()` gives them plain, for a report."""

    def __init__(self):
        self.spans: list[list] = []

    def add(self, name: str, start: float, end: float | None = None) -> None:
        self.spans.append([name, round(start, 4), round(time.monotonic() if end is None else end, 4)])

    @contextlib.contextmanager
    def span(self, name: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(name, start)

    def to_list(self) -> list[list]:
        return [list(s) for s in self.spans]


def plain_spans(value) -> list[list]:
    """The well-formed [name, start, end] spans of a report (the harness is trusted, but a report
    is parsed defensively all the same)."""
    spans = []
    for item in value if isinstance(value, list) else []:
        if (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in item[1:])):
            spans.append([item[0][:100], float(item[1]), float(item[2])])
    return spans
