"""The class report of a batch regrade: gradebook CSV, HTML report, terminal summary."""
from __future__ import annotations

import csv
import re

import pytest
from rich.console import Console

from grader import classreport
from grader.classpage import write_html
from grader.classreport import (
    Row,
    print_summary,
    summarize,
    write_gradebook,
)

pytestmark = pytest.mark.unit  # the whole module runs in this process (the fast lane)

HOSTILE = "<script>alert(1)</script>.py"
FORMULA = "=cmd|' /C calc'!A0.py"

BUGS = {
    "mask_after_softmax": {"id": "mask_after_softmax", "title": "The causal mask is applied after the softmax",
                           "fix": "Mask the scores before the softmax.", "advice": False},
    "wrong_split": {"id": "wrong_split", "title": "The heads are split along the wrong axis",
                    "fix": "Reshape to (B, T, h, d) then transpose.", "advice": False},
    "loop_over_heads": {"id": "loop_over_heads", "title": "The heads are computed in a Python loop",
                        "fix": "Batch the heads in one matmul.", "advice": True},
}

# (group, readable name) -> max points of its two cases
GROUPS = {
    ("test_01_interface::test_layers", "builds self.qkv and self.proj"): 5.0,
    ("test_02_causal::test_future", "Masks future positions"): 10.0,
    ("test_03_scale::test_scale", "Scales the scores by 1/sqrt(d)"): 10.0,
    ("test_04_shape::test_shape", "Keeps the input shape"): 4.0,
    ("test_05_style::test_vectorised", "Computes all heads at once"): 0.0,
}


def result(fractions: dict[str, float], bugs: tuple[str, ...] = (), score: float = 0.0,
           status: str = "graded", message: str = "") -> dict:
    """A native result JSON: each group has two parametrized cases; `fractions` by group key prefix,
    full marks for any group not named."""
    tests = []
    for (group, name), most in GROUPS.items():
        earned = fractions.get(group.split("::")[0], 1.0)
        for case in ("dim24-h4", "dim32-h2"):
            tests.append({"id": f"{group}[{case}]", "name": f"{name} [{case}]", "group": group,
                          "status": "passed" if earned == 1.0 else "failed",
                          "score": most / 2 * earned, "max_score": most / 2, "bugs": [],
                          "visibility": "visible"})
    return {"status": status, "score": score, "max_score": 100.0, "message": message,
            "bugs": [BUGS[b] for b in dict.fromkeys(bugs)], "tests": tests}


def graded(name: str, score: float, fractions: dict[str, float], bugs: tuple[str, ...] = (),
           duration: float = 3.14) -> Row:
    return Row(name, "graded", score, 100.0, bugs, duration, result(fractions, bugs, score),
               f"results/{name}.json")


@pytest.fixture
def rows() -> list[Row]:
    return [
        graded("alice/attn.py", 24.0, {"test_02_causal": 0.0, "test_03_scale": 0.5},
               ("mask_after_softmax", "loop_over_heads")),
        graded("bob/attn.py", 100.0, {}),
        # the same bug diagnosed twice in one submission: still one student
        graded("carol/attn.py", 55.0, {"test_02_causal": 0.5}, ("mask_after_softmax", "mask_after_softmax")),
        Row("dave/attn.py", "rejected", 0.0, 100.0, (), 0.42,
            result({}, status="rejected", message="No class <CausalSelfAttention> was found"),
            "results/dave/attn.py.json"),
        Row("erin/attn.py", "error", None, 100.0, (), 61.0, None, ""),
        graded(HOSTILE, 10.0, {"test_01_interface": 0.0, "test_02_causal": 0.0}, ("wrong_split",)),
        graded(FORMULA, 95.0, {"test_03_scale": 0.9}, ("mask_after_softmax",)),
    ]


# ------------------------------------------------------------------------------------------ gradebook

def read_csv(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_gradebook_header_values_and_order(rows, tmp_path):
    path = tmp_path / "gradebook.csv"
    write_gradebook(rows, path)
    table = read_csv(path)
    assert table[0] == ["submission", "status", "score", "max_score", "bugs", "duration_s", "bug_titles", "cluster"]
    by_name = {line[0]: line for line in table[1:]}
    assert by_name["alice/attn.py"] == ["alice/attn.py", "graded", "24", "100",
                                        "mask_after_softmax;loop_over_heads", "3.1",
                                        f"{BUGS['mask_after_softmax']['title']}; {BUGS['loop_over_heads']['title']}", ""]
    assert by_name["carol/attn.py"][4] == "mask_after_softmax"
    assert by_name["erin/attn.py"][1:4] == ["error", "", "100"]      # no score for a grader failure
    assert by_name["dave/attn.py"][1:3] == ["rejected", "0"]
    names = [line[0] for line in table[1:]]
    assert len(names) == len(rows)
    assert names == sorted(names, key=lambda n: n.lstrip("'"))


def test_gradebook_guards_formulas(tmp_path):
    names = ["=cmd.py", "+1.py", "-2.py", "@sum.py", "\tx.py", "\rx.py", "ok=fine.py"]
    write_gradebook([Row(n, "graded", 1.0, 100.0, (), 1.0) for n in names], tmp_path / "g.csv")
    cells = {line[0] for line in read_csv(tmp_path / "g.csv")[1:]}
    assert cells == {"'=cmd.py", "'+1.py", "'-2.py", "'@sum.py", "'\tx.py", "'\rx.py", "ok=fine.py"}


def test_gradebook_write_is_atomic(rows, tmp_path, monkeypatch):
    path = tmp_path / "gradebook.csv"
    path.write_text("the previous gradebook\n")

    def crash(*_args):
        raise OSError("disk gone")
    monkeypatch.setattr(classreport.os, "replace", crash)
    with pytest.raises(OSError):
        write_gradebook(rows, path)
    assert path.read_text() == "the previous gradebook\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gradebook.csv"]   # no temp file left behind

    monkeypatch.undo()
    write_gradebook(rows, path)
    assert read_csv(path)[0][0] == "submission"
    assert [p.name for p in tmp_path.iterdir()] == ["gradebook.csv"]


# -------------------------------------------------------------------------------------------- summary

def test_counts_and_statistics(rows):
    s = summarize(rows)
    assert (s.total, s.graded, s.rejected, s.errors) == (7, 5, 1, 1)
    assert s.error_submissions == ("erin/attn.py",)
    scores = [24, 100, 55, 0, 10, 95]          # graded and rejected, not the error
    assert s.mean == pytest.approx(sum(scores) / 6)
    assert s.median == pytest.approx(39.5)
    assert s.max_score == 100.0


def test_histogram_bins(rows):
    s = summarize(rows)
    # 0 -> 0–10, 10 -> 10–20, 24 -> 20–30, 55 -> 50–60, 95 and 100 -> 90–100
    assert s.histogram == (1, 1, 1, 0, 0, 1, 0, 0, 0, 2)
    assert s.bin_labels()[0] == "0–10" and s.bin_labels()[-1] == "90–100"


def test_histogram_edges():
    def row(score: float, most: float = 100.0) -> Row:
        return Row(f"s{score}", "graded", score, most, (), 1.0)
    s = summarize([row(100.0), row(99.99), row(90.0), row(89.99), row(30.0), row(7.0, 7.0)])
    assert s.histogram == (0, 0, 0, 1, 0, 0, 0, 0, 1, 4)


def test_bug_counts_count_each_submission_once(rows):
    s = summarize(rows)
    counts = {b.id: b.count for b in s.bugs}
    assert counts == {"mask_after_softmax": 3, "wrong_split": 1, "loop_over_heads": 1}
    top = s.bugs[0]
    assert top.id == "mask_after_softmax"
    assert top.title == "The causal mask is applied after the softmax"
    assert top.fix == "Mask the scores before the softmax."
    assert top.submissions == tuple(sorted(["alice/attn.py", "carol/attn.py", FORMULA]))
    assert s.bugs[-1].id == "loop_over_heads" and s.bugs[-1].advice   # advice after the mistakes
    assert [b.id for b in s.mistakes] == ["mask_after_softmax", "wrong_split"]


def test_weakest_groups_worst_first(rows):
    s = summarize(rows)
    # over the 5 graded submissions only; full-marks and zero-point groups are left out
    assert [g.title for g in s.weakest] == ["Masks future positions", "builds self.qkv and self.proj",
                                            "Scales the scores by 1/sqrt(d)"]
    causal, layers, scale = s.weakest
    assert causal.mean_fraction == pytest.approx(0.5) and (causal.lost, causal.submissions) == (3, 5)
    assert layers.mean_fraction == pytest.approx(0.8) and layers.lost == 1
    assert scale.mean_fraction == pytest.approx(0.88) and scale.lost == 2
    assert causal.group == "test_02_causal::test_future"


def test_weakest_groups_keep_ten():
    tests = [{"id": f"t{i}", "name": f"Group {i:02d} [x]", "group": f"g{i}", "score": i / 20,
              "max_score": 1.0} for i in range(15)]
    s = summarize([Row("a.py", "graded", 1.0, 15.0, (), 1.0, {"tests": tests})])
    assert [g.title for g in s.weakest] == [f"Group {i:02d}" for i in range(10)]


def test_zero_rows(tmp_path):
    s = summarize([])
    assert (s.total, s.graded, s.rejected, s.errors) == (0, 0, 0, 0)
    assert s.mean is None and s.median is None
    assert s.histogram == (0,) * 10 and s.bugs == () and s.weakest == ()
    write_gradebook([], tmp_path / "g.csv")
    assert read_csv(tmp_path / "g.csv") == [["submission", "status", "score", "max_score", "bugs",
                                             "duration_s", "bug_titles", "cluster"]]
    write_html(s, [], tmp_path / "r.html", title="Empty class")
    assert "No submissions" in (tmp_path / "r.html").read_text()
    console = Console(record=True, width=100)
    print_summary(s, console)
    assert "No submissions" in console.export_text()


# ----------------------------------------------------------------------------------------------- HTML

@pytest.fixture
def report(rows, tmp_path) -> str:
    path = tmp_path / "report.html"
    write_html(summarize(rows), rows, path, title="Lab 3 <attention>")
    return path.read_text(encoding="utf-8")


def test_html_escapes_student_text(report):
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.py" in report
    assert "<script" not in report.lower()
    assert "No class &lt;CausalSelfAttention&gt; was found" in report    # the rejection reason
    assert "<title>Lab 3 &lt;attention&gt;</title>" in report


def test_html_is_self_contained(report):
    assert "http://" not in report and "https://" not in report
    assert "<style>" in report and "<svg" in report
    assert not re.search(r"<(link|img|iframe|object)\b", report)


def test_html_shows_counts_bugs_groups_and_links(report):
    assert "The causal mask is applied after the softmax" in report
    assert "Mask the scores before the softmax." in report
    assert "advice" in report
    assert "Masks future positions" in report
    assert 'href="results/alice/attn.py.json"' in report
    assert "could not be graded" in report and "erin/attn.py" in report


def test_html_lists_errors_first_then_by_score(report):
    listing = report[report.index("<h2>Submissions</h2>"):]
    order = [name for name in ("erin/attn.py", "dave/attn.py", "&lt;script&gt;", "alice/attn.py",
                               "carol/attn.py", "=cmd", "bob/attn.py")]
    positions = [listing.index(name) for name in order]
    assert positions == sorted(positions)


def test_html_link_cannot_become_a_script_url(tmp_path):
    rows = [Row("x.py", "graded", 1.0, 100.0, (), 1.0, None, "javascript:alert(1)")]
    write_html(summarize(rows), rows, tmp_path / "r.html", title="t")
    text = (tmp_path / "r.html").read_text()
    assert "javascript:" not in text
    assert 'href="javascript%3Aalert%281%29"' in text


# ------------------------------------------------------------------------------------------- terminal

def summary_text(rows: list[Row]) -> str:
    console = Console(record=True, width=100)
    print_summary(summarize(rows), console)
    return console.export_text()


def test_print_summary_is_short_and_names_what_matters(rows):
    text = summary_text(rows)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= 15
    assert "7 submissions: 5 graded, 1 rejected, 1 error" in text
    assert "erin/attn.py" in next(line for line in lines if line.startswith("Errors"))
    assert "3× The causal mask is applied after the softmax" in text
    assert "Masks future positions" in text
    assert "median 39.5" in text


def test_print_summary_prints_markup_in_names_literally():
    name = "[bold red]mallory[/bold red]/attn.py"
    text = summary_text([Row(name, "error", None, 100.0, (), 1.0)])
    assert name in text


def test_print_summary_without_errors_has_no_error_line(rows):
    text = summary_text([r for r in rows if r.status != "error"])
    assert "Errors" not in text
