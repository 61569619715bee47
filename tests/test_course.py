"""The instructor's side: course files, a rescore from stored runs without a sandbox, similar
submissions, clusters of unexplained mistakes and the students' feedback pages, through the real
CLI on a small class graded once for the module (and once more, in full, under a course, to check
the rescore against it)."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.batching import ENV, BatchRun, batch, batch_without_sandbox, section
from tests.support.grading import EXAMPLES, SUBMISSIONS
from tests.support.queueing import program

CORRECT = SUBMISSIONS / "correct"
CLUSTERS = SUBMISSIONS / "clusters"
ARTIFACTS = Path(os.environ.get("GRADER_ARTIFACTS") or tempfile.mkdtemp(prefix="course-artifacts-"))
SCRIPT_NAME = "<script>alert(1)<script>.py"
HALF = ["half_output__einsum.py", "half_output__nanogpt.py", "half_output__sdpa.py"]
TANH = ["tanh_heads__einsum.py", "tanh_heads__nanogpt.py", "tanh_heads__sdpa.py"]
HONEST = ["einsum.py", "sdpa_bool_mask.py", "manual_softmax.py", "head_loop_cat.py", "view_permute_unbind.py"]
REWEIGHT = """\
time_limit_s = 90   # the exercise's own: the run key does not change
[groups.test_matches_multihead_attention]
points = 40
[groups.test_parameter_count]
points = 0
visibility = "hidden"
[groups.test_runs_on_any_device]
points = 5
[advice.mask_device_mismatch]
points = 2
"""

# A lightly edited copy of sdpa_bool_mask.py: every variable renamed, comments and docstring
# rewritten, blank lines moved.
EDITED = '''import torch
from torch import nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """My attention layer (written for the assignment)."""
    def __init__(self, dim, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)

        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        batch, length, width = x.shape
        nh = self.heads
        size = width // nh
        query, key, value = self.qkv(x).split(width, dim=-1)
        query = query.reshape(batch, length, nh, size).transpose(1, 2)
        key = key.reshape(batch, length, nh, size).transpose(1, 2)
        value = value.reshape(batch, length, nh, size).transpose(1, 2)
        # which keys each query can see
        allowed = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        allowed = allowed.view(1, 1, length, length)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.bool().view(batch, 1, 1, length)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed)
        out = out.transpose(1, 2).reshape(batch, length, width)
        return self.proj(out)
'''

# A correct layer whose feedback and name carry markup: the pages must show it, never run it.
HOSTILE = (CORRECT / "einsum.py").read_text().replace(
    "        return self.proj(y)",
    "        if t == 7:\n            raise RuntimeError('</script><script>alert(2)</script><b>bold</b>')\n"
    "        return self.proj(y)")


def build_class(folder: Path) -> None:
    folder.mkdir()
    for name in HALF + TANH:
        shutil.copy(CLUSTERS / name, folder / name)
    for name in HONEST:
        shutil.copy(CORRECT / name, folder / name)
    shutil.copy(CORRECT / "einsum.py", folder / "zoe.py")               # a renamed copy
    (folder / "yann.py").write_text(EDITED)                            # a lightly edited copy
    shutil.copy(EXAMPLES / "view_without_contiguous.py", folder / "view_without_contiguous.py")
    shutil.copy(SUBMISSIONS / "buggy" / "mask_device_mismatch__arange.py", folder / "device.py")
    (folder / SCRIPT_NAME).write_text(HOSTILE)


def scores(run: BatchRun) -> dict[str, tuple]:
    out = {}
    for name in run.index():
        r = run.result(name)
        out[name] = (r["status"], r["score"], r["max_score"], sorted(b["id"] for b in r["bugs"]),
                     [(t["id"], t["score"], t["max_score"], t["visibility"]) for t in r["tests"]])
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded once with the exercise's defaults."""
    root = tmp_path_factory.mktemp("course")
    build_class(root / "class")
    run = batch(root / "class", root / "out", "--jobs", "2")
    assert run.exit_code == 0, run.output
    return root, run


# --- course files ---------------------------------------------------------------------------------

INVALID = [
    ("time_limit = 60\n", "time_limit", 1),
    ("time_limit_s = 60\n\n[groups.test_matches_multihead_attention]\npoints = 40\npointz = 3\n", "pointz", 5),
    ("[groups.test_nope]\npoints = 1\n", "test_nope", 1),
    ("# a comment\n[groups.test_parameter_count]\nvisibility = \"secret\"\n", "visibility", 3),
    ("[groups.test_layers]\npoints = -1\n", "points", 2),
    ("[advice.no_causal_mask]\npoints = 2\n", "no_causal_mask", 1),
    ("[advice.mask_device_mismatch]\ncost = 2\n", "cost", 2),
    ("[clusters.c0123456789]\ntitle = \"x\"\n", "fix", 1),
    ("[grups.test_layers]\npoints = 1\n", "grups", 1),
    ("[groups.test_layers]\npoints = inf\n", "points", 2),
    ("[groups.test_layers]\npoints = nan\n", "points", 2),
    ("[groups.test_layers]\npoints = 1e12\n", "points", 2),
    ("[groups.test_layers]\npoints = true\n", "points", 2),
    ("time_limit_s = inf\n", "time_limit_s", 1),
    ("\n\ntime_limit_s = 1e12\n", "time_limit_s", 3),
    ("time_limit_s = 0\n", "time_limit_s", 1),
    ("[advice.mask_device_mismatch]\npoints = -inf\n", "points", 2),
    ("[advice.mask_device_mismatch]\npoints = 1e9\n", "points", 2),
    ("[clusters.cb3bf74079]\ntitle = \"x\"\nfix = \"y\"\n", "cb3bf74079", 1),
    ("[clusters.mine]\nmatch = \"C0123456789\"\ntitle = \"x\"\nfix = \"y\"\n", "match", 2),
    # the late policy: a due date with its offset, each number finite and in its range
    ("[late]\ndue = 2026-12-01T23:59:00\n", "due", 2),
    ("[late]\ndue = \"tomorrow\"\n", "due", 2),
    ("[late]\nper_day = 10\n", "due", 1),
    ("[late]\ndue = 2026-12-01T23:59:00Z\nper_day = inf\n", "per_day", 3),
    ("[late]\ndue = 2026-12-01T23:59:00Z\ncap = 150\n", "cap", 3),
    ("[late]\ndue = 2026-12-01T23:59:00Z\ngrace_minutes = -1\n", "grace_minutes", 3),
    ("[late]\ndue = 2026-12-01T23:59:00Z\ngrace_minutes = nan\n", "grace_minutes", 3),
    ("[late]\ndue = 2026-12-01T23:59:00Z\npenalty = 5\n", "penalty", 3),
]


@pytest.mark.parametrize("text,key,line", INVALID, ids=[k for _, k, _ in INVALID])
def test_an_invalid_course_file_names_the_key_and_its_line(tmp_path, text, key, line):
    course = tmp_path / "course.toml"
    course.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "grader", str(EXAMPLES / "correct.py"), "--course", str(course)],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Usage" not in proc.stderr, proc.stderr  # one line
    message = proc.stderr.strip()
    assert f"{course} line {line}:" in message and key in message, message


def test_an_out_of_range_number_names_the_range(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text("[groups.test_layers]\npoints = inf\n")
    proc = subprocess.run([sys.executable, "-m", "grader", str(EXAMPLES / "correct.py"), "--course", str(course)],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.stderr.strip() == (f"Error: --course {course} line 2: [groups.test_layers] points must be a number "
                                   "from 0 to 1000 (got inf)")


def test_points_that_add_up_to_0_are_refused(tmp_path):
    groups = subprocess.run([sys.executable, "-m", "grader", "exercises", "--groups", "causal-self-attention"],
                            capture_output=True, text=True, timeout=60).stdout.splitlines()
    course = tmp_path / "course.toml"
    course.write_text("".join(f"[groups.{line.split()[0]}]\npoints = 0\n" for line in groups))
    proc = subprocess.run([sys.executable, "-m", "grader", str(EXAMPLES / "correct.py"), "--course", str(course)],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{course} line 1:" in proc.stderr and "add up to 0" in proc.stderr


@pytest.mark.parametrize("value", ["inf", "nan", "1e12", "0", "-5", "soon"])
def test_a_time_limit_out_of_range_is_one_line_of_error(tmp_path, value):
    for command in ([str(EXAMPLES / "correct.py")], ["batch", str(EXAMPLES), "--out", str(tmp_path / "out")]):
        proc = subprocess.run([sys.executable, "-m", "grader", *command, f"--time-limit={value}"],
                              capture_output=True, text=True, timeout=120, env=ENV)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.strip().splitlines() == [
            f"Error: --time-limit must be a number from 1 to 3600 (got {float(value) if value != 'soon' else value!r})"]
        assert not (tmp_path / "out").exists()


def test_a_course_file_with_a_byte_order_mark_is_read_as_text(tmp_path):
    course = tmp_path / "course.toml"
    course.write_bytes(b"\xef\xbb\xbf# saved by a Windows editor\n[groups.test_matches_multihead_attention]\n"
                       b"points = 40\n")
    proc = subprocess.run([sys.executable, "-m", "grader", str(EXAMPLES / "correct.py"), "--course", str(course),
                           "--json", "-"], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["max_score"] == 110 and result["score"] == 110, (result["score"], result["max_score"])


def test_export_refuses_a_course_that_cannot_grade(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text("[groups.test_layers]\npoints = inf\n")
    bundle = tmp_path / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "grader", "export", "gradescope", str(bundle), "--course", str(course)],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "points must be a number from 0 to 1000 (got inf)" in proc.stderr and not bundle.exists()


def test_exercises_lists_the_groups_a_course_sets():
    proc = subprocess.run([sys.executable, "-m", "grader", "exercises", "--groups", "causal-self-attention"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = dict(line.split("\t")[:2] for line in proc.stdout.splitlines())
    assert rows["test_matches_multihead_attention"] == "30 points"
    assert rows["test_parameter_count"] == "10 points"
    assert sum(float(v.split()[0]) for v in rows.values()) == 100


# --- rescoring from stored runs -------------------------------------------------------------------

@pytest.fixture(scope="module")
def reweighted(graded):
    """The stored class rescored under a course that changes points, visibility, advice costs and
    names one cluster; and the same class graded in full under the same course."""
    root, first = graded
    half = first.result(HALF[0])["cluster"]
    course = root / "reweight.toml"
    course.write_text(REWEIGHT + f'[clusters.{half}]\ntitle = "The output is halved"\n'
                                 f'fix = "Return the projection as it is, without the factor 0.5."\n')
    shutil.copytree(root / "out", root / "rescored")
    rescored = batch_without_sandbox(root / "class", root / "rescored", "--course", str(course))
    full = batch(root / "class", root / "full", "--jobs", "2", "--course", str(course))
    return course, rescored, full


def test_a_course_naming_no_cluster_of_the_class_is_refused_with_the_clusters_listed(graded, tmp_path):
    root, first = graded
    known = sorted({first.result(name)["cluster"] for name in first.index() if first.result(name).get("cluster")})
    assert known, "the class has clusters"
    course = tmp_path / "course.toml"
    course.write_text(f'[clusters.c0000000000]\ntitle = "A typo"\nfix = "..."\n[clusters.{known[0]}]\ntitle = "x"\n'
                      'fix = "y"\n')
    before = (root / "out" / "index.json").read_text()
    run = batch_without_sandbox(root / "class", root / "out", "--course", str(course))
    assert run.exit_code == 2 and len(run.output.strip().splitlines()) == 1, run.output
    assert f"{course} line 1: [clusters.c0000000000] names no cluster of this class" in run.output
    assert all(cid in run.output for cid in known)
    assert (root / "out" / "index.json").read_text() == before  # nothing graded, nothing rescored


def test_a_first_run_naming_no_cluster_keeps_its_grades_for_the_corrected_course(tmp_path):
    """A course file written before the class was ever graded cannot be checked against its
    clusters until they are found: the first run grades, then refuses the id that names none in
    one line (file, line, key, the clusters there are), with the grades recorded, so that the
    corrected course rescores them without a sandbox."""
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(CLUSTERS / TANH[0], klass / "alice.py")   # an unexplained mistake: a cluster
    shutil.copy(CORRECT / "einsum.py", klass / "bob.py")
    course = tmp_path / "course.toml"
    course.write_text('# written in week 1\n[clusters.c0000000000]\ntitle = "A typo"\nfix = "..."\n')
    first = batch(klass, tmp_path / "out", "--course", str(course), "--jobs", "2")
    assert first.exit_code == 2, first.output
    refusal = [line for line in first.output.splitlines() if "names no cluster" in line]
    assert len(refusal) == 1, first.output
    cluster = first.result("alice.py")["cluster"]
    assert cluster and re.fullmatch(r"c[0-9a-f]{10}", cluster), cluster
    assert f"{course} line 2: [clusters.c0000000000] names no cluster of this class; its clusters: {cluster}" in refusal[0]
    assert "the grades are recorded" in refusal[0]
    assert {name: entry["status"] for name, entry in first.index().items()} == {"alice.py": "graded", "bob.py": "graded"}
    course.write_text(f'[clusters.{cluster}]\ntitle = "Tanh instead of softmax"\nfix = "Use a softmax over the keys."\n')
    second = batch_without_sandbox(klass, tmp_path / "out", "--course", str(course))
    assert second.exit_code == 0, second.output
    assert "graded 0, kept 0" in second.output and re.search(r"rescored 2 from stored runs", second.output), second.output
    assert any(b.get("title") == "Tanh instead of softmax" for b in second.result("alice.py")["bugs"])


def test_a_reweight_rescores_the_stored_batch_without_a_sandbox(graded, reweighted):
    _, first = graded
    course, rescored, _ = reweighted
    assert rescored.exit_code == 0, rescored.output
    total = len(first.index())
    assert re.search(rf"rescored {total} from stored runs in \d+\.\d s", rescored.output), rescored.output
    assert "graded 0, kept 0" in rescored.output and "warm sandbox" not in rescored.output
    comparison = rescored.result("einsum.py")
    points = {t["group"].rsplit("::", 1)[-1]: 0.0 for t in comparison["tests"]}
    for t in comparison["tests"]:
        points[t["group"].rsplit("::", 1)[-1]] += t["max_score"]
    assert round(points["test_matches_multihead_attention"], 6) == 40
    assert points["test_parameter_count"] == 0 and points["test_runs_on_any_device"] == 5
    assert comparison["max_score"] == 105 and comparison["score"] == 105
    assert comparison["environment"]["course"]["path"] == str(course)
    assert all(t["visibility"] == "hidden" for t in comparison["tests"] if "test_parameter_count" in t["group"])
    device = rescored.result("device.py")  # the advice now costs 2 points
    assert first.result("device.py")["score"] == 100  # advice only, by default
    assert device["score"] == 100 + 10 - 10 + 5 - 2 and device["max_score"] == 105, device["score"]
    assert any(b["id"] == "mask_device_mismatch" and not b["advice"] for b in device["bugs"])


def test_the_rescore_gives_the_scores_of_a_full_regrade(reweighted):
    _, rescored, full = reweighted
    assert full.exit_code == 0, full.output
    assert "warm sandbox" in full.output  # this one did grade
    assert scores(rescored) == scores(full)


def test_a_changed_time_limit_regrades(graded, tmp_path):
    root, first = graded
    course = tmp_path / "limit.toml"
    course.write_text("time_limit_s = 200\n")
    shutil.copytree(root / "out", tmp_path / "out")
    run = batch_without_sandbox(root / "class", tmp_path / "out", "--course", str(course))
    assert run.exit_code != 0 and "a sandbox was started" in run.output, run.output


# --- similar submissions --------------------------------------------------------------------------

def test_copies_are_flagged_and_honest_solutions_are_not(graded):
    _, run = graded
    similar = section((run.out / "report.html").read_text(), "Similar submissions")
    flagged = {frozenset(html.unescape(n) for n in re.findall(r"<code>([^<]*)</code></a> and <a [^>]*><code>"
                                                              r"([^<]*)</code>", row)[0])
               for row in similar.split("<tr>")[2:]}
    assert frozenset({"einsum.py", "zoe.py"}) in flagged
    assert frozenset({"sdpa_bool_mask.py", "yann.py"}) in flagged
    assert not [p for p in flagged if p <= set(HONEST)], flagged  # no two independent solutions
    assert similar.count("identical files") == 1  # only the renamed copy is byte for byte the same
    assert 'class="same"' in similar  # the shared lines, side by side
    for name in ("einsum.py", "zoe.py"):  # and no score changes for it
        assert run.result(name)["score"] == 100


# --- clusters -------------------------------------------------------------------------------------

def test_two_shared_mistakes_outside_the_catalog_form_two_clusters(graded):
    _, run = graded
    for name in HALF + TANH:
        result = run.result(name)
        assert result["status"] == "graded" and result["score"] < result["max_score"]
        assert [b for b in result["bugs"] if not b["advice"]] == [], result["bugs"]  # nothing named
    half = {run.result(n)["cluster"] for n in HALF}
    tanh = {run.result(n)["cluster"] for n in TANH}
    assert len(half) == 1 and len(tanh) == 1 and half != tanh
    assert all("cluster" not in run.result(n) for n in HONEST + ["view_without_contiguous.py"])
    part = section((run.out / "report.html").read_text(), "Unexplained mistakes")
    for cid in half | tanh:
        cluster = next(c for c in part.split('<section class="cluster"') if f'<code class="muted">{cid}</code>' in c)
        assert "3 students lose points" in cluster and "largest difference" in cluster


def test_a_named_cluster_reaches_every_member_on_rescore(graded, reweighted):
    _, first = graded
    _, rescored, _ = reweighted
    cid = first.result(HALF[0])["cluster"]
    for name in HALF:
        bugs = rescored.result(name)["bugs"]
        assert [b["id"] for b in bugs] == [f"course:{cid}"] and bugs[0]["title"] == "The output is halved"
        assert "factor 0.5" in rescored.result(name)["feedback"]
    for name in TANH + HONEST:
        assert all(not b["id"].startswith("course:") for b in rescored.result(name)["bugs"])
    part = section((rescored.out / "report.html").read_text(), "Unexplained mistakes")
    assert "The output is halved" in part


# --- pages ----------------------------------------------------------------------------------------

def test_every_submission_links_to_its_feedback_page(graded):
    _, run = graded
    report = (run.out / "report.html").read_text()
    listing = section(report, "Submissions")
    for name, entry in run.index().items():
        page = run.out / entry["page_file"]
        assert page.is_file()
        href = html.escape(entry["page_file"].replace("<", "%3C").replace(">", "%3E"))
        assert f'href="{href}"' in listing, (name, href)
        assert f'href="{html.escape(entry["result_file"].replace("<", "%3C").replace(">", "%3E"))}"' in listing


def test_pages_show_markup_from_the_student_and_never_run_it(graded):
    _, run = graded
    page = (run.out / run.index()[SCRIPT_NAME]["page_file"]).read_text()
    assert "<script" not in page.lower() and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;script&gt;.py" in page
    assert "&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert "<script" not in (run.out / "report.html").read_text().lower()


def test_a_failure_repeated_in_every_case_is_said_once(graded):
    _, run = graded
    result = run.result("view_without_contiguous.py")
    page = html.unescape(re.sub(r"<[^>]+>", "", (run.out / run.index()["view_without_contiguous.py"]
                                                 ["page_file"]).read_text()))
    for text in (result["feedback"], page):
        flat = " ".join(text.split()).split("What went wrong", 1)[1]
        assert "the same error in all" in flat
        # once as raised, once as the property gate's reason: not once per test group (8)
        assert flat.count("view size is not compatible") == 2, flat
    assert " ".join(result["feedback"].split()) in " ".join(page.split())  # the terminal's text


def _chromium(*args: str, tmp: Path, height: int = 2000) -> subprocess.CompletedProcess:
    return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}",
                           f"--window-size=1280,{height}", *args], capture_output=True, text=True, timeout=120)


def test_the_report_and_a_page_in_headless_chromium(graded, reweighted, tmp_path):
    program("chromium")  # fails, never skips, where scripts/services did not install it
    _, run = graded
    _, rescored, _ = reweighted
    shots = {"report.png": (rescored.out / "report.html").as_uri(),
             "report-full.png": (rescored.out / "report.html").as_uri(),  # down to the similar pairs
             "page-view_without_contiguous.png": (run.out / run.index()["view_without_contiguous.py"]
                                                  ["page_file"]).as_uri(),
             "page-script.png": (run.out / run.index()[SCRIPT_NAME]["page_file"]).as_uri()}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, target in shots.items():
        proc = _chromium(f"--screenshot={ARTIFACTS / name}", target, tmp=tmp_path / name,
                         height=6000 if "full" in name else 2000)
        assert (ARTIFACTS / name).is_file() and (ARTIFACTS / name).stat().st_size > 20_000, proc.stderr[-2000:]
    dom = _chromium("--dump-dom", (run.out / run.index()[SCRIPT_NAME]["page_file"]).as_uri(),
                    tmp=tmp_path / "dom").stdout
    assert "alert(2)" in dom and "<script" not in dom.lower()
    report = _chromium("--dump-dom", (rescored.out / "report.html").as_uri(), tmp=tmp_path / "dom2").stdout
    assert "Similar submissions" in report and "The output is halved" in report and "<script" not in report.lower()
    print(f"\nscreenshots in {ARTIFACTS}")


# --- one file and the platforms -------------------------------------------------------------------

PLATFORM_COURSE = """\
[groups.test_matches_multihead_attention]
points = 40
[groups.test_parameter_count]
visibility = "after_due_date"
"""


def test_grade_file_under_a_course(tmp_path):
    import hashlib
    course = tmp_path / "course.toml"
    course.write_text(PLATFORM_COURSE)
    from tests.support.grading import grade
    graded = grade(EXAMPLES / "correct.py", "--course", str(course))
    assert graded.exit_code == 0, graded.terminal
    assert graded.result["score"] == graded.result["max_score"] == 110
    assert graded.group("test_matches_multihead_attention") == (40, 40)
    assert graded.result["environment"]["course"] == {"path": str(course),
                                                      "sha256": hashlib.sha256(course.read_bytes()).hexdigest()}
    assert "110 / 110" in graded.terminal


def test_the_platforms_take_the_course_visibility_and_points(tmp_path):
    course = tmp_path / "course.toml"
    # Gradescope's metadata says the upload came 1 day and 1 minute late: 2 started days, 20% of 110 off
    course.write_text(PLATFORM_COURSE + "[late]\ndue = 2026-11-30T12:00:00Z\nper_day = 10\n")
    for platform, upload in (("gradescope", "submission"), ("prairielearn", "student")):
        root = tmp_path / platform
        (root / upload).mkdir(parents=True)
        shutil.copy(EXAMPLES / "correct.py", root / upload / "attention.py")
        (root / "submission_metadata.json").write_text('{"created_at": "2026-12-01T12:01:00.000000+00:00"}')
        proc = subprocess.run([sys.executable, "-m", "grader", "platform", platform, "--root", str(root),
                               "--course", str(course)], capture_output=True, text=True, timeout=300, env=ENV)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        results = json.loads((root / "results" / "results.json").read_text())
        if platform == "gradescope":
            assert sum(t["score"] for t in results["tests"]) == pytest.approx(110)
            assert results["score"] == 88 and results["output"].startswith("Submitted 2 day(s) late: 22 points off")
            params = [t for t in results["tests"] if "parameters" in t["name"]]
            assert params and all(t["visibility"] == "after_due_date" for t in params)
            assert round(sum(t["max_score"] for t in results["tests"] if "nn.MultiheadAttention with your" in t["name"]),
                         6) == 40
        else:   # PrairieLearn's job carries no submission time: the policy is not applied, and it says so
            assert results["score"] == 1.0
            assert "The course's [late] is not applied on prairielearn" in proc.stdout, proc.stdout
            held = [t for t in results["tests"] if t["name"] == "Tests not shown"]
            assert held and held[0]["max_points"] == 10
            assert not [t for t in results["tests"] if "parameters" in t["name"]]


def test_the_gradescope_bundle_carries_the_course(tmp_path):
    import zipfile
    course = tmp_path / "course.toml"
    course.write_text(PLATFORM_COURSE)
    bundle = tmp_path / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "grader", "export", "gradescope", str(bundle), "--course", str(course)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(bundle) as z:
        assert z.read("course.toml") == course.read_bytes()
        assert '--course "$course"' in z.read("run_autograder").decode()  # found under Gradescope's layout
    course.write_text("[groups.test_nothing]\npoints = 1\n")  # checked before it is shipped
    proc = subprocess.run([sys.executable, "-m", "grader", "export", "gradescope", str(bundle), "--course", str(course)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "test_nothing" in proc.stderr


def test_a_template_is_left_out_of_the_comparison(graded, tmp_path):
    """Starter code handed out with the assignment is everyone's: handed as --template, what the
    students share only through it no longer makes them alike; identical files stay flagged."""
    root, first = graded
    before = section((first.out / "report.html").read_text(), "Similar submissions")
    shutil.copytree(root / "out", tmp_path / "out")
    run = batch_without_sandbox(root / "class", tmp_path / "out", "--template", str(CORRECT / "einsum.py"))
    assert run.exit_code == 0, run.output
    after = section((tmp_path / "out" / "report.html").read_text(), "Similar submissions")
    def pairs(part: str) -> set[frozenset[str]]:
        return {frozenset(html.unescape(n) for n in m) for m in re.findall(
            r"<code>([^<]*)</code></a> and <a [^>]*><code>([^<]*)</code>", part)}
    derived = frozenset({"einsum.py", "half_output__einsum.py"})
    assert derived in pairs(before) and derived not in pairs(after)
    assert frozenset({"einsum.py", "zoe.py"}) in pairs(after) and "identical files" in after
