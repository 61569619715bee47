"""Confusion table of the bug diagnosis over the project's own corpus.

    .venv/bin/python bench/diagnosis_confusion.py [--jobs 2]

Grades every file in tests/submissions/buggy (the first line says `# bug: <id>[, <id>]`) and in
tests/submissions/correct (no bug) with the local sandbox, then prints, per true id, what was
diagnosed, and the share of files diagnosed exactly (the same set of ids, nothing more, nothing less).
"""
from __future__ import annotations

import argparse
import collections
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader import grading  # noqa: E402

CORPUS = ROOT / "tests" / "submissions"


def true_ids(path: Path) -> frozenset[str]:
    """The ids a file's first line declares; `trivial` files and correct ones declare none."""
    if path.parent.name == "correct":
        return frozenset()
    first = path.read_text(errors="replace").splitlines()[0]
    ids = [i.strip() for i in first.removeprefix("# bug:").split(",")]
    return frozenset(i for i in ids if i and i != "trivial")


def diagnosed(path: Path) -> frozenset[str]:
    return frozenset(b.id for b in grading.grade_file(path).bugs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    files = sorted((CORPUS / "buggy").glob("*.py")) + sorted((CORPUS / "correct").iterdir())
    with ThreadPoolExecutor(args.jobs) as pool:
        got = dict(zip(files, pool.map(diagnosed, files)))
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    exact = 0
    misses = []
    for path, found in got.items():
        truth = true_ids(path)
        label = ", ".join(sorted(truth)) or ("(correct)" if path.parent.name == "correct" else "(trivial)")
        table[label][", ".join(sorted(found)) or "-"] += 1
        if found == truth:
            exact += 1
        else:
            misses.append(f"  {path.parent.name}/{path.name}: expected {sorted(truth)}, diagnosed {sorted(found)}")
    width = max(len(k) for k in table)
    print(f"{'true id':<{width}}  diagnosed (count)")
    for label in sorted(table):
        print(f"{label:<{width}}  " + "; ".join(f"{k} ({n})" for k, n in table[label].most_common()))
    print(f"\nexactly diagnosed: {exact} of {len(got)} files ({100 * exact / len(got):.0f}%)")
    if misses:
        print("not exact:\n" + "\n".join(misses))


if __name__ == "__main__":
    main()
