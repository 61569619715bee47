"""A graded corpus: files graded once per test run, by warm `grade batch` runs, read by many tests.

Grading a file with `grade FILE` costs a fresh Python, a torch import and a sandbox (4 to 8 s, more
under load); a warm batch grades the same file in a fraction of that. A `Corpus` names the files a
set of tests asserts on; the first test that asks for a file's result grades the chunk the file is
in, by one `grade batch`, and every other test (on any pytest-xdist worker) reads that result
(tests.support.shared). Chunks keep each batch to a few minutes, so no test waits long on one and
both workers can grade different chunks at once.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.grading import CALL_LIMIT, IMPORT_LIMIT
from tests.support.batching import batch
from tests.support.grading import SUBMISSIONS
from tests.support.shared import once, run_dir

CHUNK = 36   # files per batch: under a minute of a warm batch's work on a quiet 2-core machine (each batch
             # starts two warm sandboxes, about 4.4 CPU-s: fewer, bigger chunks spend less on them)


def chunk_of(items: list, i: int, size: int = CHUNK) -> tuple[int, list]:
    """The chunk that holds items[i] (its number and its items), the list cut into chunks of about
    `size`, as even as they come: 52 items make 2 chunks of 26, not 24, 24 and 4 (each batch
    starts its slots, whatever it grades)."""
    count = max(1, round(len(items) / size))
    per = -(-len(items) // count)   # the ceiling
    k = i // per
    return k, items[k * per:(k + 1) * per]


@dataclass(frozen=True)
class Corpus:
    """`files`: the key a test asks by, and how to make the file (its text or its bytes, or a path
    to copy). `args`: the batch's options (an exercise, a sandbox); `env`: variables for it."""
    name: str
    files: dict[str, Path | Callable[[], str | bytes]]
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    chunk: int = CHUNK

    def result(self, key: str) -> dict:
        """The batch's result JSON for this file."""
        keys = sorted(self.files)
        assert key in self.files, f"{key} is not in the corpus {self.name}"
        k, chunk = chunk_of(keys, keys.index(key), self.chunk)
        return once(f"corpus-{self.name}-{k}", lambda: self._grade(chunk))[key]

    __getitem__ = result   # corpus[key]: the same, as a mapping reads

    def _grade(self, keys: list[str]) -> dict[str, dict]:
        root = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=run_dir()))
        (root / "class").mkdir()
        names = {key: key.replace("/", "__") for key in keys}
        for key, name in names.items():
            source = self.files[key]
            target = root / "class" / name
            if isinstance(source, Path):
                target.write_bytes(source.read_bytes())
            else:
                made = source()
                target.write_bytes(made if isinstance(made, bytes) else made.encode())
        run = batch(root / "class", root / "out", "--jobs", "2", *self.args, timeout=900, env=self.env)
        assert run.exit_code == 0, f"the batch of {self.name} failed: {run.output[-3000:]}"
        return {key: run.result(name) for key, name in names.items()}


# The corpora several test files read: the correct styles by file name; the buggy and
# outside-the-catalog files by 'folder/name' (graded as 'folder__name').
CORRECT = Corpus("correct", {path.name: path for path in sorted((SUBMISSIONS / "correct").iterdir())})
BUGGY_AND_UNKNOWN = Corpus("buggy-unknown", {f"{folder}/{path.name}": path for folder in ("buggy", "unknown")
                                             for path in sorted((SUBMISSIONS / folder).glob("*.py"))})
# The second exercise's (causal-attention-head) correct, buggy and outside-the-catalog files.
HEAD_EXERCISE = "causal-attention-head"
HEAD_CORPUS = Corpus("head", {f"{folder}/{path.name}": path for folder in ("correct", "buggy", "unknown")
                              for path in sorted((SUBMISSIONS / "head" / folder).glob("*.py"))},
                     args=("--exercise", HEAD_EXERCISE))
# The files that are rejected, that exit, hang or flood, and the clusters' mistakes, by 'folder/name':
# graded here only to be held against the Docker sandbox's grades of them (their own tests grade them
# cold, each as it needs), with the host's call and import limits at 1 s and 2 s, as those tests do.
EDGE = Corpus("edge", {f"{folder}/{path.name}": path for folder in ("malformed", "hostile", "clusters")
                       for path in sorted((SUBMISSIONS / folder).iterdir())},
              env={CALL_LIMIT: "1", IMPORT_LIMIT: "2"})
LOCAL_CORPORA = (CORRECT, BUGGY_AND_UNKNOWN, HEAD_CORPUS, EDGE)


def in_docker(corpus: Corpus) -> Corpus:
    """The same files graded by warm batches in the Docker sandbox: what tests/test_docker.py holds
    against the local sandbox's results, file by file. Bigger chunks than the local corpora's (each
    batch starts its containers; a test waits on one chunk at most once a run)."""
    return Corpus(f"{corpus.name}-docker", corpus.files, args=(*corpus.args, "--sandbox", "docker"),
                  env=corpus.env, chunk=2 * corpus.chunk)


def graded_in_corpus(path: Path) -> dict | None:
    """The result a corpus above holds for this file of tests/submissions (correct/, buggy/ or
    unknown/), None for a file in no corpus: what a test that compares another way of grading (the
    service, the queue, the Docker sandbox) with `grade batch` reads, instead of grading the file
    cold once more."""
    if path.parent == SUBMISSIONS / "correct":
        return CORRECT.result(path.name)
    if path.parent in (SUBMISSIONS / "buggy", SUBMISSIONS / "unknown"):
        return BUGGY_AND_UNKNOWN.result(f"{path.parent.name}/{path.name}")
    return None
