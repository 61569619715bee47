"""The class report, the students' pages and the terminal summary read right: titles instead of
ids, points rounded as people read them and exact max scores in the JSON, hidden and after-due
groups marked for the instructor and left off the students' pages until released, a cluster in one
sentence with its members' code side by side, a named cluster's page that does not contradict
itself. Through the real CLI on a small class graded once, rescored under courses without a
sandbox; looked at in headless Chromium, the screenshots kept in the test's tmp dir."""
from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.batching import ENV, BatchRun, batch, batch_without_sandbox, section
from tests.support.grading import SUBMISSIONS
from tests.support.queueing import program

CLUSTERS = SUBMISSIONS / "clusters"
CORRECT = SUBMISSIONS / "correct"
HALF = ["half_output__einsum.py", "half_output__nanogpt.py", "half_output__sdpa.py"]
TANH = ["tanh_heads__einsum.py", "tanh_heads__nanogpt.py", "tanh_heads__sdpa.py"]
FULL = ["einsum.py", "nanogpt_style.py", "sdpa_bool_mask.py"]   # the code the clusters are read against
SCALE = "wrong_scale__sqrt_dim.py"                              # a mistake of the catalog
PADDING = "With right padding, every position matches nn.MultiheadAttention"
PARAMS = "4 * dim * dim + 4 * dim parameters, the same for every n_heads"
# Points that do not divide evenly among a group's 6 cases, a group hidden, one shown after the due date.
COURSE = """\
[groups.test_padding_matches_multihead_attention]
points = 10
visibility = "after_due_date"
[groups.test_autograd_sees_no_future]
points = 10
[groups.test_parameter_count]
visibility = "hidden"
"""
MAX = 100 - 12 + 10 - 12 + 10   # 96
LONG_DECIMAL = re.compile(r"\d\.\d{3,}")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded once with the exercise's defaults."""
    root = tmp_path_factory.mktemp("pages")
    folder = root / "class"
    folder.mkdir()
    for name in HALF + TANH:
        shutil.copy(CLUSTERS / name, folder / name)
    for name in FULL:
        shutil.copy(CORRECT / name, folder / name)
    shutil.copy(SUBMISSIONS / "buggy" / SCALE, folder / SCALE)
    run = batch(folder, root / "out", "--jobs", "2")
    assert run.exit_code == 0, run.output
    return root, run


def rescore(graded, name: str, course: str) -> BatchRun:
    """The stored class rescored, without a sandbox, under `course` (a fresh copy of the output)."""
    root, _ = graded
    (root / f"{name}.toml").write_text(course)
    shutil.copytree(root / "out", root / name)
    run = batch_without_sandbox(root / "class", root / name, "--course", str(root / f"{name}.toml"))
    assert run.exit_code == 0, run.output
    return run


@pytest.fixture(scope="module")
def coursed(graded):
    """Under COURSE, with the half-output cluster named."""
    _, first = graded
    half = first.result(HALF[0])["cluster"]
    return rescore(graded, "coursed", COURSE + f'[clusters.{half}]\ntitle = "The output is halved"\n'
                                              'fix = "Return the projection as it is, without the factor."\n')


@pytest.fixture(scope="module")
def released(graded):
    return rescore(graded, "released", 'released = ["after_due_date"]\n' + COURSE)


def page(run: BatchRun, name: str) -> str:
    """The student's page as its reader sees the text: tags dropped, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", (run.out / run.index()[name]["page_file"]).read_text()))


def text_of(part: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", part)).split())


def summary(run: BatchRun, label: str) -> str:
    return next((line for line in run.output.splitlines() if line.startswith(label)), "")


# --- points -------------------------------------------------------------------------------------

def test_max_scores_are_exact_in_the_json_and_points_read_rounded(coursed, released):
    scores = {}
    for name in coursed.index():
        text = (coursed.out / coursed.index()[name]["result_file"]).read_text()
        result = json.loads(text)
        assert result["max_score"] == MAX and f'"max_score": {MAX}.0,' in text, result["max_score"]
        scores[name] = result["score"]
    uneven = scores[SCALE]
    assert uneven != round(uneven, 2), "the class has a score that does not end in 2 decimals"
    shown = f"{round(uneven, 2):g}"   # e.g. 64.67
    book = coursed.gradebook()
    assert book[SCALE]["score"] == shown and book[SCALE]["max_score"] == str(MAX)
    assert not [row for row in book.values() if LONG_DECIMAL.search(row["score"])]
    listing = text_of(section((coursed.out / "report.html").read_text(), "Submissions"))
    assert f"{shown} / {MAX}" in listing and not LONG_DECIMAL.search(listing)
    student = page(released, SCALE)  # its padding group (10 points among 6 cases) is on the page
    score_lines = [line for line in student.splitlines() if " / " in line and ("✓" in line or "✗" in line
                                                                           or "Score" in line)]
    assert score_lines and not [line for line in score_lines if LONG_DECIMAL.search(line)], score_lines
    assert re.search(r"\d+\.\d\d / ", "\n".join(score_lines)), score_lines   # a share of 10 among 6 cases
    assert "(graded and rejected)" in summary(coursed, "Score") and not LONG_DECIMAL.search(summary(coursed, "Score"))


# --- named clusters -------------------------------------------------------------------------------

def test_a_named_cluster_page_does_not_contradict_itself(graded, coursed):
    _, first = graded
    for name in HALF:
        student = page(coursed, name)
        assert "Bug: The output is halved" in student and "without the factor" in student
        assert "Your instructor found this mistake" in student
        assert "no mistake in the catalog" not in student and "No known mistake matches" not in student, student
        assert "course:" not in student  # the cluster's hash is no name a student reads
        result = coursed.result(name)
        assert result["diagnosis"] == "" and "no mistake in the catalog" in result["cluster_evidence"]
        assert result["cluster_evidence"] == first.result(name)["diagnosis"]  # kept for the instructor
    for name in TANH:  # not named: the diagnosis is what they read, and it is consistent
        assert "No known mistake matches" in page(coursed, name)


# --- titles ---------------------------------------------------------------------------------------

def test_titles_not_ids_where_people_read(graded, coursed):
    _, first = graded
    report = (coursed.out / "report.html").read_text()
    assert "course:" not in report
    listing = section(report, "Submissions")
    rows = {html.unescape(m.group(2)): m.group(0) for m in
            re.finditer(r'<tr id="s-[^"]*"><td>(<a [^>]*>)?<code>([^<]*)</code>.*?</tr>', listing)}
    tanh_cluster = first.result(TANH[0])["cluster"]
    for name in HALF:
        assert "The output is halved" in rows[name]
    for name in TANH:  # an unnamed cluster's members: a label linking to its section, never blank
        assert re.search(r'<a href="#cluster-[0-9a-f]+">unexplained mistake, cluster \d</a>', rows[name]), rows[name]
    bugs_cell = text_of(rows[SCALE].split("</td>")[3])
    assert bugs_cell == "The scores are scaled wrongly", bugs_cell  # the id only on hover
    book = coursed.gradebook()
    assert book[HALF[0]]["bug_titles"] == "The output is halved"
    assert book[TANH[0]]["cluster"] == tanh_cluster and book[TANH[0]]["bugs"] == ""
    assert book[SCALE]["bug_titles"] == "The scores are scaled wrongly" and book[SCALE]["bugs"] == "wrong_scale"
    top = [line for line in coursed.output.splitlines() if "The output is halved" in line]
    assert top and "course:" not in top[0], top


# --- visibility -----------------------------------------------------------------------------------

def test_hidden_and_after_due_groups_are_marked_for_the_instructor_and_off_the_students_pages(coursed, released):
    report = (coursed.out / "report.html").read_text()
    note = text_of(report[report.index('id="withheld"'):report.index("</div>", report.index('id="withheld"'))])
    assert f"{PADDING} (10 points): shown to students after the due date · not on the students' pages" in note
    assert f"{PARAMS} (10 points): hidden from students · not on the students' pages" in note
    assert "released = [\"after_due_date\", \"hidden\"]" in note
    assert "hidden from students" in text_of(section(report, "Weakest test groups")) or \
        "shown to students after the due date" in text_of(section(report, "Weakest test groups"))
    assert "Not shown  2 groups off the students' pages until released" in coursed.output
    for name in (FULL[0], SCALE, HALF[0]):
        student = page(coursed, name)
        assert PADDING not in student and PARAMS not in student, name
        assert "Score on the tests shown" in student and "2 more test groups, worth 20 points, are not shown yet" in student
    # released after the due date: that group is on the pages, unmarked; the hidden one is not
    student = page(released, SCALE)
    assert PADDING in student and PARAMS not in student and "1 more test group, worth 10 points, is not shown yet" in student
    assert "after the due date" not in student
    later = text_of(released.out.joinpath("report.html").read_text().split('id="withheld"')[1].split("</div>")[0])
    assert f"{PADDING} (10 points): shown to students after the due date · released" in later
    assert "Not shown  1 group off the students' pages until released: " + PARAMS[:20] in released.output


def test_grade_file_under_a_course_marks_the_groups_students_do_not_see(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text(COURSE)
    proc = subprocess.run([sys.executable, "-m", "grader", str(CORRECT / "einsum.py"), "--course", str(course)],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(PADDING in line and "(shown to students after the due date)" in line for line in lines), proc.stdout
    assert any(PARAMS in line and "(hidden from students)" in line for line in lines), proc.stdout
    assert any("Score" in line and f"{MAX} / {MAX}" in line for line in lines), proc.stdout


# --- clusters -------------------------------------------------------------------------------------

def cluster_parts(report: str) -> dict[str, str]:
    part = section(report, "Unexplained mistakes")
    return {m.group(1): m.group(0) for m in
            re.finditer(r'<section class="cluster" id="cluster-[0-9a-f]+"><h3>Cluster \d+ <code class="muted">'
                        r'(c[0-9a-f]{10})</code></h3>.*?</section>', part, re.S)}


def test_a_cluster_reads_in_one_sentence_with_its_members_code_side_by_side(graded, coursed):
    _, first = graded
    parts = cluster_parts((first.out / "report.html").read_text())
    half, tanh = first.result(HALF[0])["cluster"], first.result(TANH[0])["cluster"]
    assert set(parts) == {half, tanh}
    sentences = {}
    for cid, members, marked in ((half, HALF, ("/ 2", "0.5")), (tanh, TANH, ("tanh",))):
        part = parts[cid]
        outside = re.sub(r"<details>.*?</details>", "", part, flags=re.S)
        sentence = text_of(re.search(r"<p>(.*?)</p>", outside, re.S).group(1))
        assert sentence.startswith("3 students lose points in “") and sentence.count(".") >= 1, sentence
        sentences[cid] = sentence
        # the probe numbers only behind a disclosure
        assert "largest difference" not in outside
        assert re.search(r"<details><summary>what the diagnosis saw on its probes</summary>.*largest difference",
                         part, re.S)
        # each member's code, read against the closest full-marks code, the changed lines marked
        columns = re.findall(r'<div><div class="who">.*?</pre></div>', part, re.S)
        assert len(columns) == 3, part
        for column in columns:
            who = html.unescape(re.search(r"<code>([^<]*)</code>", column).group(1))
            assert who in members
            against = re.search(r"read against <a [^>]*><code>([^<]*)</code>", column)
            assert against and html.unescape(against.group(1)) in FULL, column
            changed = [html.unescape(line) for line in
                       re.findall(r'<span class="diff"><span class="ln">[^<]*</span>([^<]*)\n</span>', column)]
            assert changed and any(m in line for m in marked for line in changed), (who, changed)
    assert sentences[half] != sentences[tanh]  # worded for each cluster, not alike
    assert any(m in sentences[half] for m in ("/ 2", "0.5")) and "tanh" in sentences[tanh]
    named = cluster_parts((coursed.out / "report.html").read_text())[half]
    assert "<b>The output is halved</b>" in named and "Fix given to the students" in named


# --- terminal -------------------------------------------------------------------------------------

def test_the_terminal_summary_mentions_clusters_and_similar_pairs(graded, coursed):
    _, first = graded
    assert summary(first, "Clusters") .startswith("Clusters   2 unexplained mistakes, 6 students, 2 not named yet")
    assert summary(coursed, "Clusters").startswith("Clusters   2 unexplained mistakes, 6 students, 1 not named yet")
    assert re.match(r"Similar\s+\d+ pairs? much alike", summary(first, "Similar")), first.output
    weakest = summary(first, "Weakest")
    assert re.search(r"\d+ of 10 students lost points", weakest), weakest
    listing = section((first.out / "report.html").read_text(), "Weakest test groups")
    assert "<th class=\"num\">Students who lost points</th>" in listing


# --- in a browser ---------------------------------------------------------------------------------

def _chromium(*args: str, profile: Path, height: int) -> subprocess.CompletedProcess:
    return subprocess.run([program("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={profile}", f"--window-size=1280,{height}", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_report_and_pages_in_headless_chromium(graded, coursed, tmp_path):
    """Screenshots (kept in this test's tmp dir, printed at the end) and the DOM Chromium built."""
    shots = {"report.png": ((coursed.out / "report.html").as_uri(), 7000),
             "page-named-cluster.png": ((coursed.out / coursed.index()[HALF[0]]["page_file"]).as_uri(), 1300),
             "page-unnamed-cluster.png": ((coursed.out / coursed.index()[TANH[0]]["page_file"]).as_uri(), 1600),
             "page-full-marks.png": ((coursed.out / coursed.index()[FULL[0]]["page_file"]).as_uri(), 900)}
    for name, (target, height) in shots.items():
        proc = _chromium(f"--screenshot={tmp_path / name}", target, profile=tmp_path / f"profile-{Path(name).stem}", height=height)
        assert (tmp_path / name).is_file() and (tmp_path / name).stat().st_size > 20_000, proc.stderr[-2000:]
    dom = _chromium("--dump-dom", (coursed.out / "report.html").as_uri(), profile=tmp_path / "dom", height=900).stdout
    assert '<section class="cluster"' in dom and 'class="diff"' in dom and "Groups the students do not see yet" in dom
    student = _chromium("--dump-dom", shots["page-named-cluster.png"][0], profile=tmp_path / "dom2", height=900).stdout
    assert "The output is halved" in student and "no mistake in the catalog" not in student and PARAMS not in student
    print(f"\nscreenshots in {tmp_path}")


def test_a_released_list_that_names_no_visibility_is_one_line_of_error(tmp_path):
    course = tmp_path / "course.toml"
    course.write_text('# when the pages show them\nreleased = ["after_due_date", "tomorrow"]\n')
    proc = subprocess.run([sys.executable, "-m", "grader", str(CORRECT / "einsum.py"), "--course", str(course)],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{course} line 2: released must be a list of 'after_due_date' and 'hidden'" in proc.stderr, proc.stderr


@pytest.mark.unit
def test_the_services_page_leaves_out_what_students_do_not_see_yet():
    """An exercise may mark a test hidden or after the due date itself: the service's page, which
    grades with no course, shows the student only the rest, and says how much is held back."""
    from grader.service import student_page as service_page
    from tests.support.records import result_with_hidden_test
    shown = text_of(service_page.feedback(result_with_hidden_test()))
    assert "Shape" in shown and "Values" not in shown and "Scores scaled wrongly" not in shown, shown
    assert "Score on the tests shown 40 / 40" in shown and "1 more test group, worth 60 points, is not shown yet" in shown


# --- the term: late policy, adjustments, the LMS export ---------------------------------------------

LATE = """\
[late]
due = 2026-11-30T12:00:00Z
per_day = 10
cap = 25
grace_minutes = 60
"""
DUE = 1796040000  # 2026-11-30T12:00:00Z
LATE_STUDENT, GRACED, EXTENDED = FULL          # full marks all three
ADJUSTMENTS = f"""\
["{EXTENDED}"]
points = 2
note = "Bonus: the write-up"
extension_days = 3

["{SCALE}"]
points = -5
note = "=HYPERLINK(\\"x\\") copied <script>alert(1)</script> the docstring"
"""


def term_run(graded, name: str, course: str, adjustments: str | None, *, source: str = "out") -> BatchRun:
    """The stored class rescored under `course` and `adjustments`, in a copy of the class whose files
    were made (mtime) 2.5 days, 30 minutes and 2 days after the due date, the others on time."""
    root, _ = graded
    folder = root / f"{name}-class"
    if not folder.exists():
        shutil.copytree(root / "class", folder)
        for entry in folder.iterdir():
            os.utime(entry, (DUE - 3600, DUE - 3600))
        for entry, late_s in ((LATE_STUDENT, 2.5 * 86400), (GRACED, 1800), (EXTENDED, 2 * 86400)):
            os.utime(folder / entry, (DUE + late_s, DUE + late_s))
    (root / f"{name}.toml").write_text(course)
    extra = ["--course", str(root / f"{name}.toml")]
    if adjustments is not None:
        (root / f"{name}-adjustments.toml").write_text(adjustments)
        extra += ["--adjustments", str(root / f"{name}-adjustments.toml")]
    if not (root / name).exists():
        shutil.copytree(root / source, root / name)
    run = batch_without_sandbox(folder, root / name, *extra)
    assert run.exit_code == 0, run.output
    return run


@pytest.fixture(scope="module")
def termed(graded):
    return term_run(graded, "term", LATE, ADJUSTMENTS)


def test_the_gradebook_shows_the_late_penalty_the_adjustment_and_the_final_score(graded, termed):
    _, first = graded
    book = termed.gradebook()
    late = book[LATE_STUDENT]
    assert (late["score"], late["late_days"], late["late_penalty"], late["final"]) == ("100", "3", "25", "75")
    assert late["submitted_at"] == "2026-12-03T00:00:00Z"
    assert (book[GRACED]["late_days"], book[GRACED]["final"]) == ("0", "100")           # within the grace
    extended = book[EXTENDED]
    assert (extended["late_days"], extended["adjustment"], extended["final"]) == ("0", "2", "102")
    assert extended["note"] == "Bonus: the write-up"
    scale = book[SCALE]
    raw = float(first.gradebook()[SCALE]["score"])
    assert scale["score"] == first.gradebook()[SCALE]["score"]
    assert float(scale["final"]) == pytest.approx(raw - 5, abs=0.01)
    assert scale["note"].startswith("'=")                                  # no formula for a spreadsheet
    assert termed.result(LATE_STUDENT)["score"] == 100                    # the result JSON is the grader's
    assert "lms.csv" in termed.output


def test_the_students_page_shows_what_the_term_changed_and_only_there(termed):
    late = page(termed, LATE_STUDENT)
    assert "Submitted 3 day(s) late: 25 points off." in late and "Final score: 75 / 100" in late
    extended = page(termed, EXTENDED)
    assert "Extension: 3 day(s)." in extended and "Adjusted by your instructor: +2 points." in extended
    assert "Note: Bonus: the write-up" in extended and "Final score: 102 / 100" in extended
    assert "Your grade this term" not in page(termed, GRACED)
    scale = (termed.out / termed.index()[SCALE]["page_file"]).read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in scale and "<script" not in scale   # shown, never run
    for name in termed.index():   # the student's page links to nothing of the instructor's
        raw = (termed.out / termed.index()[name]["page_file"]).read_text()
        assert "report.html" not in raw and ".json" not in raw and "<a " not in raw, name


def test_the_lms_export_has_canvas_columns_the_final_score_and_each_groups_points(termed):
    with open(termed.out / "lms.csv", newline="") as f:
        table = list(csv.reader(f))
    header = table[0]
    assert header[:6] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "causal-self-attention (final)"]
    rows = {line[0]: dict(zip(header, line)) for line in table[1:]}
    assert len(rows) == len(termed.index())
    late = rows[Path(LATE_STUDENT).stem]
    assert late["SIS User ID"] == Path(LATE_STUDENT).stem and late["causal-self-attention (final)"] == "75"
    groups = header[6:]
    assert len(groups) >= 5 and "With right padding, every position matches nn.MultiheadAttention" in groups
    assert sum(float(late[g]) for g in groups) == pytest.approx(100)        # the raw points, group by group
    scale = rows[Path(SCALE).stem]
    assert sum(float(scale[g]) for g in groups) == pytest.approx(float(termed.gradebook()[SCALE]["score"]), abs=0.02)


def test_a_rescore_keeps_the_adjustments_and_taking_one_back_clears_the_page(graded, termed):
    reweighted = term_run(graded, "term", LATE + "[groups.test_autograd_sees_no_future]\npoints = 20\n", ADJUSTMENTS)
    assert "rescored" in reweighted.output
    book = reweighted.gradebook()
    assert book[EXTENDED]["final"] == "110" and book[EXTENDED]["note"] == "Bonus: the write-up"   # 108 + 2
    assert "Final score: 110 / 108" in page(reweighted, EXTENDED)
    taken_back = term_run(graded, "term", LATE, f'["{SCALE}"]\npoints = -5\n')
    assert taken_back.gradebook()[EXTENDED]["adjustment"] == "0"
    extended = page(taken_back, EXTENDED)
    assert "Adjusted by your instructor" not in extended and "Extension" not in extended
    assert "Submitted 2 day(s) late: 20 points off." in extended     # no extension any more: 2 days late


def test_an_adjustment_for_no_student_of_the_class_is_one_line_naming_the_valid_ones(graded, tmp_path):
    root, _ = graded
    adjustments = tmp_path / "adjustments.toml"
    adjustments.write_text(f'["{SCALE}"]\npoints = 1\n\n["nobody.py"]\npoints = 3\n')
    run = batch_without_sandbox(root / "class", tmp_path / "out", "--adjustments", str(adjustments))
    assert run.exit_code == 2 and len(run.output.strip().splitlines()) == 1, run.output
    assert f"{adjustments} line 4: [\"nobody.py\"] is no submission of this class; its submissions: " in run.output
    assert all(name in run.output for name in HALF + FULL + [SCALE])
    for text, key, line in ((f'["{SCALE}"]\npoints = inf\n', "points", 2),
                            (f'["{SCALE}"]\nextension_days = -1\n', "extension_days", 2),
                            (f'["{SCALE}"]\n\nbonus = 1\n', "bonus", 3)):
        adjustments.write_text(text)
        run = batch_without_sandbox(root / "class", tmp_path / "out", "--adjustments", str(adjustments))
        assert run.exit_code == 2 and f"{adjustments} line {line}:" in run.output and key in run.output, run.output
    assert not (tmp_path / "out").exists()          # refused before anything ran


def test_test_scores_in_the_json_keep_a_shared_points_digits(coursed):
    padding = [t["max_score"] for t in coursed.result(FULL[0])["tests"]
               if t["group"].endswith("::test_padding_matches_multihead_attention")]   # 10 points, shared
    assert sum(padding) == pytest.approx(10, abs=1e-8), padding                         # 4 digits: off by 1e-4
    assert [p for p in padding if p != round(p, 4)] and all(p == round(p, 9) for p in padding), padding


def test_a_first_run_refuses_a_cluster_id_no_submission_has(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice").mkdir()
    (folder / "alice" / "notes.txt").write_text("no code\n")   # rejected before any sandbox runs
    course = tmp_path / "course.toml"
    course.write_text('[clusters.c0000000000]\ntitle = "A typo"\nfix = "..."\n')
    run = batch_without_sandbox(folder, tmp_path / "out", "--course", str(course))
    assert run.exit_code == 2, run.output
    assert f"--course {course} line 1: [clusters.c0000000000] names no cluster of this class; its clusters: none" \
        in run.output


def test_a_page_with_the_terms_lines_in_headless_chromium(termed, tmp_path):
    """The late student's page as Chromium renders it (screenshot kept in this test's tmp dir)."""
    target = (termed.out / termed.index()[LATE_STUDENT]["page_file"]).as_uri()
    proc = _chromium(f"--screenshot={tmp_path / 'page-late.png'}", target, profile=tmp_path / "shot", height=1100)
    assert (tmp_path / "page-late.png").stat().st_size > 20_000, proc.stderr[-2000:]
    dom = _chromium("--dump-dom", target, profile=tmp_path / "dom", height=900).stdout
    term = text_of(dom.split('<section id="term">')[1].split("</section>")[0])
    assert term == ("Your grade this term Submitted 3 day(s) late: 25 points off. "
                    "Final score: 75 / 100 (the grader's 100)."), term
    print(f"\nscreenshot in {tmp_path}")


def report_cells(report: str) -> dict[str, list[str]]:
    """The submissions' table of a report: each row's cells as text, by the submission's name."""
    table = report.split('<table id="submissions">')[1].split("</table>")[0]
    rows = [[text_of(cell) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]
    return {row[0]: row for row in rows}


def card(report: str, label: str) -> str:
    return text_of(re.search(rf'<div class="card">{label}<b>(.*?)</b>', report).group(1))


@pytest.fixture(scope="module")
def term_report(graded):
    """The term's class of `termed` in an output of its own (the tests above rescore `termed`'s again)."""
    return term_run(graded, "term-report", LATE, ADJUSTMENTS)


def test_the_class_report_shows_the_terms_columns_and_counts_the_final_scores(graded, term_report):
    termed = term_report
    _, first = graded
    raw = (first.out / "report.html").read_text()
    assert "Late penalty" not in raw and "Mean score" in raw and "final scores" not in raw
    report = (termed.out / "report.html").read_text()
    cells = report_cells(report)
    assert cells["Submission"][2:7] == ["Grader's score", "Late days", "Late penalty", "Adjustment", "Final"]
    assert cells[LATE_STUDENT][2:7] == ["100 / 100", "3", "−25", "0", "75 / 100"]
    assert cells[GRACED][2:7] == ["100 / 100", "0", "0", "0", "100 / 100"]
    assert cells[EXTENDED][3:7] == ["0", "0", "+2 extension 3 d Bonus: the write-up", "102 / 100"]
    book = termed.gradebook()
    scale = cells[SCALE]
    assert scale[2] == f"{book[SCALE]['score']} / 100" and scale[5].startswith("−5 ")
    assert scale[6] == f"{book[SCALE]['final']} / 100"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in report and "<script" not in report   # the note, escaped
    # the statistics are of the gradebook's `final`, and the heading and the cards say so
    finals = [float(row["final"]) for row in book.values()]
    raws = [float(row["score"]) for row in book.values()]
    assert statistics.fmean(finals) != pytest.approx(statistics.fmean(raws), abs=0.1)   # the term changes the mean
    assert card(report, "Mean final score") == f"{statistics.fmean(finals):.1f}".rstrip("0").rstrip(".") + " / 100"
    assert card(report, "Median final score") == f"{statistics.median(finals):.1f}".rstrip("0").rstrip(".") + " / 100"
    heading = text_of(re.search(r'<h2 id="distribution">(.*?)</h2>', report).group(1))
    assert heading.startswith("Score distribution (final scores: the late policy and the adjustments applied"), heading
    assert "final scores" in summary(termed, "Score"), termed.output
    # the listing runs by final score: the late student's 75 before the others' 100
    order = list(cells)[1:]
    assert order.index(LATE_STUDENT) < order.index(GRACED) and order.index(EXTENDED) == len(order) - 1


def test_the_class_report_with_the_terms_columns_in_headless_chromium(term_report, tmp_path):
    termed = term_report
    target = (termed.out / "report.html").as_uri()
    proc = _chromium(f"--screenshot={tmp_path / 'report-term.png'}", target, profile=tmp_path / "shot", height=4000)
    assert (tmp_path / "report-term.png").stat().st_size > 20_000, proc.stderr[-2000:]
    dom = _chromium("--dump-dom", target, profile=tmp_path / "dom", height=900).stdout
    cells = report_cells(dom)
    assert cells[LATE_STUDENT][2:7] == ["100 / 100", "3", "−25", "0", "75 / 100"], cells[LATE_STUDENT]
    assert "Mean final score" in dom and "Bonus: the write-up" in dom
    print(f"\nscreenshot in {tmp_path}")
