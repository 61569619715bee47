"""The similarity finder: disguised copies found and honest work not, through `grade batch` on a small
class (its threshold option, similar.csv and .json, the cap's notice, an earlier term, torch's own
source), and the finder itself where no grade is needed."""
from __future__ import annotations

import ast
import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

import exercise as exercises
from bench.similarity import labelled
from grader import similarity
from tests.support.batching import batch
from tests.support.queueing import ACCEPT_LOCAL

ROOT = Path(__file__).resolve().parents[1]
BENCH, COPIES_OF = labelled([ROOT / "bench" / name for name in ("similarity_class", "similarity_heldout",
                                                                 "similarity_heldout2")])   # name -> file; true pairs
STARTER = similarity.starter_code(exercises.get(exercises.DEFAULT).statement)
COPIES = [("g5_sdpa.py", "g5_sdpa__split.py"), ("g2_einsum.py", "g2_einsum__matmul.py")]
HONEST = ["h_sdpa_amy.py", "h_sdpa_cai.py"]
STUBS = ["stub_eve.py", "stub_fin.py"]


def torch_copy() -> str:
    """A submission made of torch's own multi_head_attention_forward (and its helpers), taken from
    the installed torch when the test runs (nothing of torch is kept in this project)."""
    path = Path(importlib.util.find_spec("torch").origin).parent / "nn" / "functional.py"
    text = path.read_text()
    wanted = {"multi_head_attention_forward", "_in_projection_packed", "_canonical_mask", "_none_or_dtype",
              "_mha_shape_check"}
    lines = text.splitlines()
    parts = ["\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.parse(text).body
             if isinstance(node, ast.FunctionDef) and node.name in wanted]
    return ("import math\nimport torch\nimport torch.nn as nn\nfrom torch import Tensor\nfrom typing import Optional\n"
            "from torch.nn.functional import linear, softmax, dropout, pad, scaled_dot_product_attention\n"
            "DType = torch.dtype\n\n\n" + "\n\n\n".join(parts) + '''


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        pad = None if key_padding_mask is None else ~key_padding_mask
        y, _ = multi_head_attention_forward(
            x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), x.shape[-1], self.n_heads,
            self.qkv.weight, self.qkv.bias, None, None, False, 0.0, self.proj.weight, self.proj.bias,
            training=False, key_padding_mask=pad, need_weights=False, attn_mask=causal)
        return y.transpose(0, 1)
''')


def files(names: list[str], folder: Path | None = None) -> list[similarity.File]:
    """The named files of `folder`, or of the bench's class."""
    paths = {n: folder / n if folder is not None else BENCH[n] for n in names}
    return [similarity.File(n, p.read_bytes(), similarity.sha256(p.read_bytes())) for n, p in paths.items()]


def pairs_of(findings: similarity.Findings) -> set[frozenset[str]]:
    return {frozenset((p.a, p.b)) for p in findings.pairs}


# --- the finder itself -------------------------------------------------------------------------------

@pytest.mark.unit
def test_disguised_copies_are_found_and_honest_solutions_and_stubs_are_not():
    names = [n for pair in COPIES for n in pair] + HONEST + STUBS
    found = similarity.find(files(names), STARTER)
    assert pairs_of(found) == {frozenset(p) for p in COPIES}, [(p.a, p.b, p.similarity) for p in found.pairs]
    assert set(STUBS) <= set(found.short)  # too little code after the boilerplate to pair on


@pytest.mark.unit
def test_the_whole_bench_class_separates_at_the_default():
    """Every labelled copy of the bench's classes at or above the threshold, no honest pair."""
    found = similarity.find(files(sorted(BENCH)), STARTER)
    assert pairs_of(found) == COPIES_OF


BODY = "def f(self, x, m):\n{}\n"
EQUIVALENT = [  # (name, one way, another way): each pair must have one normal form
    ("renamed", "    s = x @ x.transpose(-2, -1)\n    return s.softmax(-1)",
     "    scores = x @ x.transpose(-2, -1)\n    return scores.softmax(-1)"),
    ("matmul and @", "    return torch.matmul(x, m)", "    return x @ m"),
    ("einsum and @", "    return torch.einsum('bhqd,bhkd->bhqk', x, m)", "    return x @ m.transpose(-2, -1)"),
    (".mT", "    return x @ m.mT", "    return x @ m.transpose(-1, -2)"),
    ("function and method", "    return F.softmax(x, dim=-1)", "    return x.softmax(-1)"),
    ("split lines", "    y = x.reshape(2, 3)\n    y = y.transpose(1, 2)\n    return y", "    return x.reshape(2, 3).transpose(1, 2)"),
    ("reordered", "    a = x.exp()\n    b = m.exp()\n    return a + b", "    b = m.exp()\n    a = x.exp()\n    return a + b"),
    ("dead code", "    unused = x.sum()\n    if False:\n        print(x)\n    return x.exp()\n    x = 1", "    return x.exp()"),
    ("in place", "    x.masked_fill_(m, 0.0)\n    return x", "    x = x.masked_fill(m, 0.0)\n    return x"),
    ("-inf", "    return x.masked_fill(m, float('-inf'))", "    return x.masked_fill(m, -math.inf)"),
    ("packed", "    a, b = x.exp(), m.exp()\n    return a - b", "    a = x.exp()\n    b = m.exp()\n    return a - b"),
]


@pytest.mark.unit
@pytest.mark.parametrize("one,other", [(a, b) for _, a, b in EQUIVALENT], ids=[n for n, _, _ in EQUIVALENT])
def test_equivalent_code_has_one_normal_form(one, other):
    from grader import codenorm
    forms = [[s.text for s in codenorm.normal_form("import torch, math\nimport torch.nn.functional as F\n" + BODY.format(b))]
             for b in (one, other)]
    assert forms[0] == forms[1]


@pytest.mark.unit
def test_a_one_line_helper_reads_as_written_in_place():
    from grader import codenorm
    helper = ("class C:\n    def _fold(self, t, n):\n        return t.reshape(n, -1).transpose(1, 2)\n"
              "    def forward(self, x, n):\n        return self._fold(x, n) @ self._fold(x, n)\n")
    inline = ("class C:\n    def forward(self, x, n):\n"
              "        return x.reshape(n, -1).transpose(1, 2) @ x.reshape(n, -1).transpose(1, 2)\n")
    assert [s.text for s in codenorm.normal_form(helper)] == [s.text for s in codenorm.normal_form(inline)]


@pytest.mark.unit
def test_different_code_keeps_different_normal_forms():
    from grader import codenorm
    prefix = "import torch\n"
    a = codenorm.normal_form(prefix + BODY.format("    return x.softmax(-1) @ m"))
    b = codenorm.normal_form(prefix + BODY.format("    return x.softmax(-2) @ m"))
    c = codenorm.normal_form(prefix + BODY.format("    return (x @ m).softmax(-1)"))
    assert len({tuple(s.text for s in f) for f in (a, b, c)}) == 3


@pytest.mark.unit
def test_a_template_and_the_statement_are_left_out(tmp_path):
    """Two files that share only the handed-out template are not a pair; the same two without it are."""
    template = BENCH["g5_sdpa.py"].read_text()
    one, two = template + "\n\ndef helper_one(a, b):\n    return a * 2 + b\n", template + "\n\ndef helper_two(z):\n    return z - 1\n"
    (tmp_path / "one.py").write_text(one)
    (tmp_path / "two.py").write_text(two)
    (tmp_path / "template.py").write_text(template)
    both = files(["one.py", "two.py"], tmp_path)
    assert pairs_of(similarity.find(both, STARTER)) == {frozenset(("one.py", "two.py"))}
    with_template = similarity.starter_code(exercises.get(exercises.DEFAULT).statement, tmp_path / "template.py")
    assert not similarity.find(both, with_template).pairs


@pytest.mark.unit
def test_code_that_does_not_parse_is_still_compared(tmp_path):
    source = BENCH["g1_nanogpt.py"].read_text()
    (tmp_path / "a.py").write_text(source + "\nthis is not python (\n")
    (tmp_path / "b.py").write_text(source.replace("att", "w") + "\nnor is this ]\n")
    assert pairs_of(similarity.find(files(["a.py", "b.py"], tmp_path), STARTER)) == {frozenset(("a.py", "b.py"))}


@pytest.mark.unit
@pytest.mark.parametrize("value", ["0", "-0.1", "1.5", "nan", "inf", "abc", ""])
def test_a_bad_threshold_is_refused(value):
    with pytest.raises(similarity.BadThreshold, match="from 0 to 1"):
        similarity.check_threshold(value)


@pytest.mark.unit
def test_a_submission_made_of_torchs_source_is_flagged_and_honest_ones_are_not(tmp_path):
    (tmp_path / "borrowed.py").write_text(torch_copy())
    known = similarity.known_sources(exercises.get(exercises.DEFAULT).directory)
    assert known, "torch's attention source is read from the installed torch"
    honest = files(HONEST + ["g1_nanogpt.py", "g4_permute.py"])
    found = similarity.find(files(["borrowed.py"], tmp_path) + honest + known, STARTER)
    flagged = [p for p in found.pairs if p.origin is similarity.Origin.KNOWN]
    assert [p.a for p in flagged] == ["borrowed.py"], [(p.a, p.b, p.similarity) for p in found.pairs]
    assert flagged[0].note == "copied from torch's source" and "multi_head_attention_forward" in flagged[0].b
    assert any(shared for _, _, shared in flagged[0].lines_b)  # torch's lines it shares, with their numbers


# --- through `grade batch` -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A small class graded once: two disguised copy pairs, two honest SDPA solutions, two stubs, a
    submission made of torch's source; and an earlier term with a copy of one of them."""
    root = tmp_path_factory.mktemp("similar")
    klass, earlier = root / "class", root / "term1"
    klass.mkdir()
    earlier.mkdir()
    for name in [n for pair in COPIES for n in pair] + HONEST + STUBS:
        shutil.copy(BENCH[name], klass / name)
    (klass / "borrowed.py").write_text(torch_copy())
    shutil.copy(BENCH["g3_chunk.py"], klass / "g3_chunk.py")
    shutil.copy(BENCH["g3_chunk__einsum.py"], earlier / "last_year.py")  # a copy of last year's
    shutil.copy(BENCH["h_example.py"], earlier / "other.py")
    run = batch(klass, root / "out", "--jobs", "2", "--compare-with", str(earlier), *ACCEPT_LOCAL)
    assert run.exit_code in (0, 1), run.output  # a grade of torch's copy may be refused: still a row
    return root, run


def rows(out: Path) -> list[dict]:
    with open(out / "similar.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_similar_csv_and_json_list_the_copies_the_earlier_term_and_torch(graded):
    _, run = graded
    table = rows(run.out)
    found = {frozenset((r["submission"], r["other"])): r for r in table}
    for pair in COPIES:
        assert frozenset(pair) in found and found[frozenset(pair)]["other_origin"] == "class"
    earlier = found[frozenset(("g3_chunk.py", "term1/last_year.py"))]
    assert earlier["other_origin"] == "earlier term" and earlier["note"] == "an earlier term's submission"
    torch_rows = [r for r in table if r["other_origin"] == "known source"]
    assert [r["submission"] for r in torch_rows] == ["borrowed.py"]
    assert torch_rows[0]["note"] == "copied from torch's source"
    flagged = {n for r in table for n in (r["submission"], r["other"])}
    assert not flagged & set(HONEST + STUBS), table  # honest solutions and stubs: no pair
    document = json.loads((run.out / "similar.json").read_text())
    assert document["threshold"] == similarity.THRESHOLD and document["pairs_found"] == len(table)
    assert set(STUBS) <= set(document["short"])
    assert all(p["shared_lines"] for p in document["pairs"])
    # the earlier term is compared, not graded
    assert not any("last_year" in k for k in run.index())
    assert "copied from a library's source" in run.output and "similar.csv" in run.output


def test_the_report_shows_the_pairs_with_what_they_are(graded):
    _, run = graded
    page = (run.out / "report.html").read_text()
    section = page[page.index('id="similar"'):]
    assert "copied from torch&#x27;s source" in section and "an earlier term&#x27;s submission" in section
    assert "term1/last_year.py" in section and "Showing the" not in section  # nothing cut


def test_a_lower_threshold_and_the_cap_notice(graded, tmp_path):
    """At threshold 0.05 from a rerun (nothing regraded), honest pairs appear too; with more pairs than
    the report shows, it and the terminal say how many were cut."""
    root, first = graded
    shutil.copytree(first.out, tmp_path / "out")
    run = batch(root / "class", tmp_path / "out", "--similar-threshold", "0.05", "--compare-with",
                str(root / "term1"), *ACCEPT_LOCAL)
    assert "graded 0, kept 10" in run.output  # only the comparison is new
    table = rows(run.out)
    assert len(table) > len(rows(first.out)), run.output
    assert {frozenset(("g5_sdpa__split.py", "h_sdpa_amy.py"))} <= {frozenset((r["submission"], r["other"])) for r in table}
    assert json.loads((run.out / "similar.json").read_text())["threshold"] == 0.05
    if len(table) > similarity.MAX_PAIRS:
        assert "more pair(s) are only in" in run.output
    # the cap notice, from the report's section with more pairs than it shows
    from grader.instructor_sections import similar_section
    many = similarity.Findings(tuple(similarity.Pair(f"a{i}.py", f"b{i}.py", 0.9, False, (), ())
                                     for i in range(similarity.MAX_PAIRS + 7)), 0.8)
    html = similar_section(many)
    assert f"Showing the {similarity.MAX_PAIRS} most alike of {similarity.MAX_PAIRS + 7} pairs" in html
    assert html.count("<tr><td") == similarity.MAX_PAIRS


@pytest.mark.parametrize("value", ["1.5", "nan", "abc"])
def test_a_bad_threshold_is_one_line_and_exit_2(tmp_path, value):
    run = batch(ROOT / "examples", tmp_path / "out", "--similar-threshold", value, *ACCEPT_LOCAL)
    assert run.exit_code == 2, run.output
    assert run.output.strip().splitlines() == [
        f"Error: --similar-threshold must be a number from 0 to 1 (a share of fingerprints in common), not {value}"]
    assert not (tmp_path / "out").exists()  # nothing graded


def test_the_terminal_and_the_report_say_when_the_cap_cuts_pairs(tmp_path):
    """Twelve lightly edited copies of one file make 66 pairs: the report shows the cap's worth and
    says how many more similar.csv has; so does the terminal. The copies are compared whatever
    their grade: each raises at its import's end, so the batch rejects it at once instead of
    grading twelve layers in full (3 s instead of 20 here)."""
    klass = tmp_path / "class"
    klass.mkdir()
    source = BENCH["g1_nanogpt.py"].read_text()
    for i in range(12):
        (klass / f"s{i:02}.py").write_text(f"# student {i}\n" + source.replace("att", f"att{i}")
                                           + '\nraise RuntimeError("not finished yet")\n')
    run = batch(klass, tmp_path / "out", "--jobs", "2", *ACCEPT_LOCAL)
    assert run.exit_code == 0, run.output
    assert len(rows(run.out)) == 66
    cut = 66 - similarity.MAX_PAIRS
    assert f"{cut} more pair(s) are only in" in run.output
    section = (run.out / "report.html").read_text().split('id="similar"', 1)[1]
    assert f"Showing the {similarity.MAX_PAIRS} most alike of 66 pairs" in section


@pytest.mark.unit
def test_a_file_too_big_to_rewrite_is_compared_on_its_plain_tokens():
    """The attack of 10,000 definitions of one name: the rewriting (quadratic in a block) is not
    tried, and the file is still compared, on its tokens."""
    from grader import codenorm
    source = (ROOT / "tests" / "submissions" / "attacks" / "many_definitions_of_one_name.py").read_bytes()
    assert codenorm.normal_form(source.decode()) is None
    assert len(similarity.tokens(source)) == len(similarity.plain_tokens(source)) > 10_000


def test_comparing_a_class_with_itself_is_refused(tmp_path):
    run = batch(ROOT / "examples", tmp_path / "out", "--compare-with", str(ROOT / "examples"), *ACCEPT_LOCAL)
    assert run.exit_code == 2 and "is the folder being graded" in run.output, run.output
    assert len(run.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
