"""Fuzzing the harness's side of the protocol through the real CLI: a submission whose worker answers
at random (tests/submissions/fuzz/random_answers.py), graded with many seeds. Nothing it sends may
void a grade: every grade is a graded result, with a message on every failed test.

The seeds of one sandbox are graded in one warm `grade batch` (tests.support.corpus): the harness
reads a worker's answers the same way in a batch's slot as in `grade FILE`, and a batch must also
come through each of them with the next file still graded (the batch exits 0, or the corpus
fails). `grade FILE`'s own exit status is the subject of tests/test_cli_contract.py."""
from __future__ import annotations

import pytest

from tests.support.corpus import Corpus
from tests.support.grading import SUBMISSIONS

TEMPLATE = SUBMISSIONS / "fuzz" / "random_answers.py"
SEEDS = {"local": range(1, 9), "docker": range(101, 104)}


def _seeded(seed: int) -> str:
    source = TEMPLATE.read_text()
    assert "\nSEED = 0\n" in source
    return source.replace("\nSEED = 0\n", f"\nSEED = {seed}\n")


FUZZED = {sandbox: Corpus(f"fuzz-{sandbox}", {f"random_answers_{seed}.py": lambda seed=seed: _seeded(seed) for seed in seeds},
                          args=("--sandbox", sandbox))
          for sandbox, seeds in SEEDS.items()}


def cases():
    for sandbox, seeds in SEEDS.items():
        for seed in seeds:
            yield pytest.param(sandbox, seed, id=f"{sandbox}-seed{seed}",
                               marks=[pytest.mark.docker] if sandbox == "docker" else [])


@pytest.mark.parametrize("sandbox,seed", list(cases()))
def test_random_answers_never_void_a_grade(sandbox, seed):
    result = FUZZED[sandbox].result(f"random_answers_{seed}.py")
    assert result["status"] == "graded", result.get("message")
    assert 0 <= result["score"] < 100
    assert all(t["feedback"] for t in result["tests"] if t["status"] != "passed")
