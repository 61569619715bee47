"""How well the similarity finder tells copies from honest work, beside copydetect, on one class.

    .venv/bin/python bench/similarity.py [--class DIR ...] [--threshold 0.8]

The class (bench/similarity_class/, labelled by its manifest.toml) holds disguised copies of correct
solutions (renames and dead code, split and merged lines, reordered statements, equivalent tensor ops
swapped), independent solutions that follow the statement closely and `return x` stubs sharing the
class boilerplate. Every pair of files is scored by grader.similarity (the figure `grade batch`
shows, with the statement's code left out) and by copydetect's fingerprints (its default k = 25 and
window 6, the statement's code as its boilerplate, a pair's figure the larger of its two shares);
printed: recall and precision of ours at the threshold, and the ROC AUC of both.

copydetect is a bench dependency only: `.venv/bin/pip install copydetect==0.5.0` (without it, its
column says so).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tomllib
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import exercise as exercises  # noqa: E402
from grader import similarity  # noqa: E402

CLASS = ROOT / "bench" / "similarity_class"


def labelled(folders: list[Path]) -> tuple[dict[str, Path], set[frozenset[str]]]:
    """The class's files by class name (every folder's, and the corpus files its manifest takes in,
    one class) and its true copy pairs (every pair inside a manifest group)."""
    files, groups = {}, {}
    for folder in folders:
        manifest = tomllib.loads((folder / "manifest.toml").read_text())
        groups |= manifest["groups"]
        found = [(f.name, f) for f in sorted(folder.glob("*.py"))]
        found += [(name, ROOT / path) for name, path in manifest.get("corpus", {}).items()]
        for name, path in found:
            if name in files:
                raise SystemExit(f"two files of the class are named {name}")
            files[name] = path
    copies = set()
    for group, members in groups.items():
        missing = set(members) - set(files)
        if missing:
            raise SystemExit(f"manifest group {group} names files the class lacks: {sorted(missing)}")
        copies |= {frozenset(p) for p in combinations(members, 2)}
    return dict(sorted(files.items())), copies


def auc(scores: dict[frozenset[str], float], copies: set[frozenset[str]]) -> float:
    """ROC AUC: the chance that a random copy pair scores above a random honest pair (ties half)."""
    positive = [s for p, s in scores.items() if p in copies]
    negative = [s for p, s in scores.items() if p not in copies]
    wins = sum((pos > neg) + 0.5 * (pos == neg) for pos in positive for neg in negative)
    return wins / (len(positive) * len(negative))


def records(files: dict[str, Path]) -> list[similarity.File]:
    return [similarity.File(name, path.read_bytes(), similarity.sha256(path.read_bytes())) for name, path in files.items()]


def ours(files: dict[str, Path], starter: list[str]) -> dict[frozenset[str], float]:
    return similarity.scores(records(files), starter)


def copydetect_scores(files: dict[str, Path], starter: list[str]) -> dict[frozenset[str], float] | None:
    try:
        import numpy as np
        from copydetect import CodeFingerprint, compare_files
    except ImportError:
        return None
    k, window = 25, 6   # copydetect's defaults: noise threshold 25, guarantee threshold 30
    with tempfile.TemporaryDirectory() as tmp:
        boiler = Path(tmp) / "statement.py"
        boiler.write_text("\n".join(starter))
        boilerplate = np.array(sorted(CodeFingerprint(str(boiler), k, window, language="python").hashes))
        prints = {name: CodeFingerprint(str(path), k, window, boilerplate=boilerplate, language="python")
                  for name, path in files.items()}
    out = {}
    for a, b in combinations(sorted(prints), 2):
        _, (share_a, share_b), _ = compare_files(prints[a], prints[b])
        out[frozenset((a, b))] = float(max(share_a, share_b))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class", dest="folders", type=Path, action="append",
                        help="a labelled class folder (again for more, measured as one class; default: "
                             "bench/similarity_class)")
    parser.add_argument("--threshold", type=float, default=similarity.THRESHOLD)
    args = parser.parse_args()
    folders = args.folders or [CLASS]
    files, copies = labelled(folders)
    starter = similarity.starter_code(exercises.get(exercises.DEFAULT).statement)
    started = time.perf_counter()
    mine = ours(files, starter)
    took = time.perf_counter() - started
    flagged = {p for p, s in mine.items() if s >= args.threshold}
    found = flagged & copies
    recall = len(found) / len(copies)
    precision = len(found) / len(flagged) if flagged else 1.0
    print(f"class: {len(files)} files, {len(mine)} pairs, {len(copies)} true copy pairs ({', '.join(str(f) for f in folders)})")
    print(f"grader.similarity at threshold {args.threshold:g}: recall {recall:.2f} ({len(found)}/{len(copies)}), "
          f"precision {precision:.2f} ({len(found)}/{len(flagged)}), {took:.2f} s")
    for pair in sorted(copies - flagged, key=sorted):
        print(f"  missed copy:   {' ~ '.join(sorted(pair))}  {mine[pair]:.2f}")
    for pair in sorted(flagged - copies, key=sorted):
        print(f"  honest, shown: {' ~ '.join(sorted(pair))}  {mine[pair]:.2f}")
    honest_top = max(s for p, s in mine.items() if p not in copies)
    copy_low = min(s for p, s in mine.items() if p in copies)
    print(f"  lowest copy pair {copy_low:.2f}, highest honest pair {honest_top:.2f}")
    known = similarity.known_sources(exercises.get(exercises.DEFAULT).directory)
    if known:  # no file of the class copies torch: how close the nearest comes to its attention source
        against = [p for p in similarity.find(records(files) + known, starter, threshold=1e-12).pairs
                   if p.origin is similarity.Origin.KNOWN]
        top = max(against, key=lambda p: p.similarity, default=None)
        print(f"  against torch's own attention source: highest figure {top.similarity if top else 0:.2f}"
              + (f" ({top.a})" if top else ""))
    theirs = copydetect_scores(files, starter)
    print(f"ROC AUC: grader.similarity {auc(mine, copies):.3f}   copydetect "
          + (f"{auc(theirs, copies):.3f}" if theirs is not None else "not installed (pip install copydetect==0.5.0)"))


if __name__ == "__main__":
    main()
