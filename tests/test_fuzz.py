"""Fuzzing the harness's side of the protocol through the real CLI: a submission whose worker answers
at random (tests/submissions/fuzz/random_answers.py), graded with many seeds. Nothing it sends may
void a grade: every grade is a graded result, exit status 0, with a message on every failed test."""
from __future__ import annotations

import pytest

from tests.support.grading import SUBMISSIONS, grade

TEMPLATE = SUBMISSIONS / "fuzz" / "random_answers.py"
SEEDS = {"local": range(1, 9), "docker": range(101, 104)}


def cases():
    for sandbox, seeds in SEEDS.items():
        for seed in seeds:
            yield pytest.param(sandbox, seed, id=f"{sandbox}-seed{seed}",
                               marks=[pytest.mark.docker] if sandbox == "docker" else [])


@pytest.mark.parametrize("sandbox,seed", list(cases()))
def test_random_answers_never_void_a_grade(tmp_path, sandbox, seed):
    source = TEMPLATE.read_text()
    assert "\nSEED = 0\n" in source
    path = tmp_path / f"random_answers_{seed}.py"
    path.write_text(source.replace("\nSEED = 0\n", f"\nSEED = {seed}\n"))
    graded = grade(path, "--sandbox", sandbox)
    result = graded.result
    assert graded.exit_code == 0 and result and result["status"] == "graded", \
        (result or {}).get("message") or graded.terminal[-3000:]
    assert 0 <= result["score"] < 100
    assert all(t["feedback"] for t in result["tests"] if t["status"] != "passed")
