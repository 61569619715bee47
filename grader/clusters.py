"""Clusters of unexplained mistakes: graded submissions that lose points while no mistake in the
catalog is named, grouped by how their output behaves, so that an instructor reads one of them and
writes one piece of feedback for all (a course file names a cluster: grader.course).

The signature is behaviour, never code: the set of failing test cases, and the diagnosis's note on
where the output differs from the reference on its probes. The probes run with the grader's own
weights and inputs, so two submissions that make the same mistake give the same note (its figures
are rounded to 3 digits), however differently they are written; the tests' own feedback is left
out, since it shows values computed with each student's random initial weights.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from grader.result import Bug, TestResult, TestStatus, is_course_bug


def signature(tests: Sequence[TestResult], bugs: Sequence[Bug], note: str) -> str:
    """The cluster id of a graded report, or '' when it is not an unexplained mistake (every test
    passed, or a mistake from the catalog is named): from its tests, bugs and diagnosis note as the
    report gave them (grader.scoring parses them once, before a course's weights, so a course never
    changes it: the id a course file names stays its members' id)."""
    if any(not b.advice for b in bugs):
        return ""
    failing = sorted(t.id for t in tests if t.status is not TestStatus.PASSED)
    if not failing:
        return ""
    return "c" + hashlib.sha256(json.dumps([failing, note]).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Cluster:
    """One signature across the class."""
    id: str
    members: tuple[str, ...]       # submission names, sorted; the first is the representative
    evidence: str                  # the representative's diagnosis, as its students read it
    failing: tuple[str, ...]       # the test groups its members lose points in (titles)
    name: str = ""                 # the course's title for it, once named
    fix: str = ""

    @property
    def size(self) -> int:
        return len(self.members)


def clusters(rows) -> tuple[Cluster, ...]:
    """The clusters of a batch's rows (classreport.Row), largest first; a cluster of one is kept
    (a mistake only one student made is still one to read)."""
    from grader.result import group_title
    members: dict[str, list] = {}
    for row in rows:
        cid = row.result.get("cluster") if isinstance(row.result, dict) else None
        if row.status == "graded" and isinstance(cid, str) and cid:
            members.setdefault(cid, []).append(row)
    out = []
    for cid, group in members.items():
        group.sort(key=lambda r: r.submission)
        first = group[0].result
        named = next((b for b in first.get("bugs") or () if isinstance(b, dict)
                      and is_course_bug(str(b.get("id", "")))), {})
        titles = dict.fromkeys(group_title(str(t.get("name", ""))) for t in first.get("tests") or ()
                               if isinstance(t, dict) and t.get("status") != "passed" and t.get("max_score"))
        out.append(Cluster(id=cid, members=tuple(r.submission for r in group),
                           evidence=str(first.get("diagnosis") or first.get("cluster_evidence")
                                        or named.get("evidence") or ""),
                           failing=tuple(titles), name=str(named.get("title") or ""), fix=str(named.get("fix") or "")))
    return tuple(sorted(out, key=lambda c: (-c.size, c.id)))
