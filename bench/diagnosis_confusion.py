"""How far the diagnosis and the score can be trusted, over the project's own corpus.

    .venv/bin/python bench/diagnosis_confusion.py [--jobs 2] [--sandbox local] [--exercise causal-attention-head]

Grades every file of the exercise's corpus (tests/submissions for causal-self-attention,
tests/submissions/head for causal-attention-head), folders correct (no bug), buggy (the first line says
`# bug: <id>[, <id>]`) and unknown (a mistake outside the catalog: `# unknown: ...`) in one
`grade batch` run, then prints:
- per catalog id: how many files declare it, precision and recall of its name;
- wrong names: an id given that the file does not declare (goal 0). Advice (worth no points) given
  to a file that does not declare it is listed apart: a style remark can be true of any file;
- unnamed catalog bugs: an id a file declares that the diagnosis did not give;
- correct files below full marks (goal 0) and buggy files at full marks (goal 0; a file whose only
  declared ids are advice, or were presented as advice because they cost no points in that grade,
  is allowed full marks);
- files outside the catalog without the "no known mistake matches" note;
- diagnosis crashes (goal 0): files whose diagnosis had a step fail on what the student's code
  returned (the harness's raw report, OUT/runs/, lists it under `diagnosis_skipped`): the tests
  still grade such a file, but a mistake that step would have named goes unnamed.
"""
from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from exercise.causal_attention_head.catalog import CATALOG as HEAD_CATALOG  # noqa: E402
from exercise.causal_self_attention.catalog import CATALOG  # noqa: E402

FOLDERS = ("correct", "buggy", "unknown")
# exercise -> its corpus, its catalog's ids, the ids that are advice (worth no points)
EXERCISES = {
    "causal-self-attention": (ROOT / "tests" / "submissions", set(CATALOG),
                              {bug_id for bug_id, info in CATALOG.items() if info.advice}),
    "causal-attention-head": (ROOT / "tests" / "submissions" / "head", set(HEAD_CATALOG), set()),
}


def declared(path: Path) -> frozenset[str]:
    """The ids a file's first line declares; correct and unknown files and `trivial` ones declare none."""
    if path.parent.name != "buggy":
        return frozenset()
    first = path.read_text(errors="replace").splitlines()[0]
    ids = [i.strip() for i in first.removeprefix("# bug:").split(",")]
    return frozenset(i for i in ids if i and i != "trivial")


def corpus(root: Path) -> list[Path]:
    return [p for folder in FOLDERS for p in sorted((root / folder).glob("*"))
            if p.suffix in (".py", ".ipynb")]


def grade_all(files: list[Path], jobs: int, sandbox: str, exercise: str) -> tuple[dict[str, dict], dict[str, list]]:
    """Every file graded by one `grade batch`: results by the batch's file name, and the diagnosis
    steps that failed (the raw reports' `diagnosis_skipped`) of the files where any did."""
    work = Path(tempfile.mkdtemp(prefix="confusion-"))
    try:
        (work / "class").mkdir()
        for path in files:
            shutil.copyfile(path, work / "class" / f"{path.parent.name}__{path.name}")
        subprocess.run([sys.executable, "-m", "grader", "batch", str(work / "class"), "--out", str(work / "out"),
                        "--jobs", str(jobs), "--sandbox", sandbox, "--exercise", exercise], check=False, stdout=subprocess.DEVNULL)
        results = {}
        for result_file in (work / "out" / "results").glob("*.json"):
            result = json.loads(result_file.read_text())
            results[result["submission"]["name"]] = result
        index = json.loads((work / "out" / "index.json").read_text())["submissions"]
        crashed = {}
        for name, entry in index.items():
            run_file = entry.get("run_file")
            if run_file and (work / "out" / run_file).exists():
                skipped = (json.loads((work / "out" / run_file).read_text()).get("report") or {}).get("diagnosis_skipped")
                if skipped:
                    crashed[name] = list(skipped)
        return results, crashed
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--exercise", default="causal-self-attention", choices=sorted(EXERCISES))
    args = parser.parse_args()
    root, ids, advice = EXERCISES[args.exercise]
    files = corpus(root)
    results, crashed = grade_all(files, args.jobs, args.sandbox, args.exercise)
    per_id = collections.defaultdict(lambda: collections.Counter())   # id -> tp, fp, fn, declared
    wrong, unnamed, advice_extra, below, full, no_note, errors = [], [], [], [], [], [], []
    for path in files:
        name = f"{path.parent.name}/{path.name}"
        result = results.get(f"{path.parent.name}__{path.name}")
        if result is None or result["status"] == "error":
            errors.append(name)
            continue
        truth = declared(path)
        named = frozenset(b["id"] for b in result["bugs"])
        for bug_id in truth:
            per_id[bug_id]["declared"] += 1
            per_id[bug_id]["tp" if bug_id in named else "fn"] += 1
            if bug_id not in named:
                unnamed.append(f"{name}: {bug_id} not named (named: {sorted(named) or '-'})")
        for bug_id in named - truth:
            if bug_id in advice:
                advice_extra.append(f"{name}: advice {bug_id}")
            else:
                per_id[bug_id]["fp"] += 1
                wrong.append(f"{name}: named {bug_id}, declares {sorted(truth) or '-'}")
        score = result["score"] or 0.0
        if path.parent.name == "correct" and score < result["max_score"]:
            below.append(f"{name}: {score:g}")
        # Advice costs nothing by design; so does a mistake whose tests all passed in this grade,
        # which the result then presents as advice (score and feedback agree).
        advice_here = advice | {b["id"] for b in result["bugs"] if b["advice"]}
        advice_only = bool(truth) and truth <= advice_here
        if path.parent.name != "correct" and score >= result["max_score"] and not advice_only:
            full.append(name)
        if path.parent.name == "unknown" and "no mistake in the catalog" not in (result.get("diagnosis") or ""):
            no_note.append(name)
    counts = collections.Counter(p.parent.name for p in files)
    print(f"corpus: {counts['correct']} correct, {counts['buggy']} buggy (catalog), {counts['unknown']} "
          f"outside the catalog; graded with `grade batch --exercise {args.exercise} --sandbox {args.sandbox}`")
    print(f"\n{'id':<28} {'files':>5} {'precision':>9} {'recall':>7}")
    for bug_id in sorted(ids):
        c = per_id[bug_id]
        precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else float("nan")
        recall = c["tp"] / c["declared"] if c["declared"] else float("nan")
        print(f"{bug_id:<28} {c['declared']:>5} {precision:>9.2f} {recall:>7.2f}")
    print()
    for label, items in (("wrong names (goal 0)", wrong), ("unnamed catalog bugs", unnamed),
                         ("correct files below full marks (goal 0)", below),
                         ("buggy files at full marks (goal 0)", full),
                         ("files outside the catalog without the 'no known mistake' note", no_note),
                         ("advice given to files that do not declare it", advice_extra),
                         ("diagnosis crashes (goal 0)", [f"{n.replace('__', '/', 1)}: {'; '.join(s)[:300]}"
                                                         for n, s in sorted(crashed.items())]),
                         ("grader errors", errors)):
        print(f"{label}: {len(items)}")
        for item in items:
            print(f"    {item}")


if __name__ == "__main__":
    main()
