"""The platforms' contracts: each entry point runs on a platform's folder layout (made in a temporary
folder; for PrairieLearn also inside the real image), and the file it writes is checked against the
platform's rules as written in the research notes (required fields, types, score range, size)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import formats
from sandbox.docker import labels
from tests.support.grading import EXAMPLES, ROOT, SUBMISSIONS
from tests.support.records import result_with_hidden_test

GS_FORMATS = {"text", "simple_format", "html", "md", "ansi"}
GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def check_gradescope(doc: dict, *, graded: bool = True) -> None:
    """Gradescope's results.json rules (autograder specs)."""
    assert isinstance(doc["execution_time"], (int, float))
    assert isinstance(doc["output"], str) and doc["output_format"] in GS_FORMATS
    assert doc["visibility"] in GS_VISIBILITY and doc["stdout_visibility"] in GS_VISIBILITY
    assert isinstance(doc["tests"], list)
    if not graded:
        return
    assert isinstance(doc["score"], (int, float)) and not isinstance(doc["score"], bool)
    numbers = set()
    for test in doc["tests"]:
        assert isinstance(test["name"], str) and test["name"]
        assert isinstance(test["number"], str) and test["number"] not in numbers
        numbers.add(test["number"])
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])
        assert isinstance(test["output"], str) and test["output_format"] in GS_FORMATS
        assert isinstance(test["tags"], list) and all(isinstance(t, str) for t in test["tags"])
        assert test["visibility"] in GS_VISIBILITY
    if doc["tests"]:
        assert abs(sum(t["score"] for t in doc["tests"]) - doc["score"]) < 1e-3


def check_prairielearn(doc: dict, raw: bytes) -> None:
    """PrairieLearn's external-grader results.json rules."""
    assert len(raw) < 1_000_000
    assert isinstance(doc["gradable"], bool)
    if not doc["gradable"]:
        errors = doc["format_errors"]
        assert (isinstance(errors, str) and errors) or (errors and all(isinstance(e, str) for e in errors))
        return
    assert isinstance(doc["score"], (int, float)) and 0 <= doc["score"] <= 1
    for key in ("message", "output"):
        assert isinstance(doc.get(key, ""), str)
    for test in doc["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["description"], str)
        assert isinstance(test["points"], (int, float)) and isinstance(test["max_points"], (int, float))
        assert 0 <= test["points"] <= test["max_points"]
        assert isinstance(test["message"], str) and isinstance(test["output"], str)


def run_entry(platform: str, root: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "platform", platform, "--root", str(root), *extra],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def upload(folder: Path, *files: Path, name: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        (folder / (name or f.name)).write_bytes(f.read_bytes())


def results(root: Path) -> tuple[dict, bytes]:
    raw = (root / "results" / "results.json").read_bytes()
    return json.loads(raw), raw


# ------------------------------------------------------------------------------------------ Gradescope

def test_gradescope_entry_grades_a_buggy_upload_with_tagged_tests(tmp_path):
    upload(tmp_path / "submission", EXAMPLES / "mask_after_softmax.py")
    proc = run_entry("gradescope", tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc, _ = results(tmp_path)
    check_gradescope(doc)
    assert 0 < doc["score"] < 100
    failed = [t for t in doc["tests"] if t["status"] == "failed"]
    assert failed and any("mask_after_softmax" in t["tags"] for t in failed)
    tagged = next(t for t in failed if "mask_after_softmax" in t["tags"])
    assert "Fix:" in tagged["output"] and "after the softmax" in tagged["output"]
    assert "mask_after_softmax" in doc["output"]       # the bug paragraph leads the summary
    assert "causal-self-attention" in proc.stdout       # readable feedback on stdout, for instructors


def test_gradescope_entry_gives_full_marks_to_a_notebook_among_other_files(tmp_path):
    folder = tmp_path / "submission"
    upload(folder, EXAMPLES / "notebook.ipynb")
    (folder / "notes.txt").write_text("my notes")
    (folder / "helper.py").write_text("def helper():\n    return 1\n")
    proc = run_entry("gradescope", tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc, _ = results(tmp_path)
    check_gradescope(doc)
    assert doc["score"] == 100 and all(t["status"] == "passed" for t in doc["tests"])
    assert doc["extra_data"]["submission"] == "notebook.ipynb"


@pytest.mark.parametrize("case", ["syntax_error", "empty_upload"])
def test_gradescope_rejected_upload_scores_zero_and_says_why(tmp_path, case):
    folder = tmp_path / "submission"
    folder.mkdir()
    if case == "syntax_error":
        (folder / "attention.py").write_text("class CausalSelfAttention(:\n    pass\n")
    proc = run_entry("gradescope", tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc, _ = results(tmp_path)
    check_gradescope(doc)
    assert doc["score"] == 0 and doc["tests"] == []
    assert "REJECTED" in doc["output"]
    assert ("line 1" in doc["output"]) if case == "syntax_error" else ("no .py or .ipynb" in doc["output"])


def test_gradescope_grader_failure_records_no_score_and_exits_1(tmp_path):
    upload(tmp_path / "submission", EXAMPLES / "correct.py")
    proc = run_entry("gradescope", tmp_path, "--sandbox", "docker",
                     env={"GRADER_IMAGE": "attention-grader:no-such-tag"})
    assert proc.returncode == 1
    doc, _ = results(tmp_path)
    check_gradescope(doc, graded=False)
    assert "score" not in doc and doc["tests"] == []
    assert doc["extra_data"]["status"] == "error" and "GRADER ERROR" in doc["output"]


def test_results_left_by_the_student_are_replaced_never_followed(tmp_path):
    upload(tmp_path / "submission", EXAMPLES / "padding_ignored.py")
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "results.json").symlink_to(outside)
    assert run_entry("gradescope", tmp_path).returncode == 0
    doc, _ = results(tmp_path)
    check_gradescope(doc)
    assert doc["score"] < 100 and outside.read_text() == "untouched"
    assert not (tmp_path / "results" / "results.json").is_symlink()


COURSE = "[groups.test_matches_multihead_attention]\npoints = 40\n"   # full marks 110 instead of 100


def gradescope_layout(tmp_path: Path, *course: str) -> Path:
    """`grade export gradescope` (with `course`, a course file's text), laid out as Gradescope
    documents it: the zip unzipped into autograder/source, run_autograder copied alone to
    autograder/, the upload in autograder/submission. Returns the autograder folder."""
    bundle = tmp_path / "autograder.zip"
    extra = []
    if course:
        (tmp_path / "course.toml").write_text(course[0])
        extra = ["--course", str(tmp_path / "course.toml")]
    proc = subprocess.run([sys.executable, "-m", "grader", "export", "gradescope", str(bundle), *extra],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "autograder"
    source = root / "source"
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names)
        for name in ("setup.sh", "run_autograder"):
            assert (z.getinfo(name).external_attr >> 16) & 0o111, f"{name} is not executable"
        z.extractall(source)
    for name in ("setup.sh", "run_autograder"):
        os.chmod(source / name, 0o755)
    shutil.copy2(source / "run_autograder", root / "run_autograder")
    upload(root / "submission", EXAMPLES / "view_without_contiguous.py")
    return root


def test_gradescope_run_autograder_grades_an_upload_under_the_bundles_course_file(tmp_path):
    """run_autograder, copied to the autograder folder as Gradescope does, grades an upload under
    the course file the bundle carries (which stays in source/), with the grader this checkout
    installed. setup.sh's install of the grader is the next test's, in the image, as Gradescope
    runs it (as root, network off): pip installing torch twice cost the suite a minute of CPU."""
    root = gradescope_layout(tmp_path, COURSE)
    run = subprocess.run([str(root / "run_autograder")], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "GRADER": str(Path(sys.executable).parent / "grade"),
                              "AUTOGRADER_ROOT": str(root)})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc, _ = results(root)
    check_gradescope(doc)
    assert any("view_without_contiguous" in t["tags"] for t in doc["tests"])
    assert sum(t["max_score"] for t in doc["tests"]) == pytest.approx(110)   # the course's points


def test_gradescope_bundle_without_its_course_file_fails_instead_of_grading_without_it(tmp_path):
    root = gradescope_layout(tmp_path, COURSE)
    (root / "source" / "course.toml").unlink()
    run = subprocess.run([str(root / "run_autograder")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "GRADER": "/bin/false", "AUTOGRADER_ROOT": str(root)})
    assert run.returncode == 1 and "course.toml is in neither" in run.stderr, run.stderr


@pytest.mark.docker
def test_gradescope_bundle_runs_from_autograder_in_the_image(tmp_path):
    """The bundle in the grader image, the way Gradescope runs it: unzipped into /autograder/source,
    setup.sh run there as root (installing from the wheelhouse, network off), run_autograder run
    from /autograder; the course's points are in results.json, and no number in it is infinite."""
    import docker
    root = gradescope_layout(tmp_path, COURSE)
    client = docker.from_env()
    script = ("set -e; PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse bash /autograder/source/setup.sh > /autograder/setup.out; "
              "cd /autograder && ./run_autograder")
    container = client.containers.run(os.environ.get("GRADER_IMAGE", "attention-grader:latest"),
                                      entrypoint=["bash", "-c", script], network_mode="none", detach=True,
                                      volumes={str(root): {"bind": "/autograder", "mode": "rw"},
                                               str(ROOT / "wheelhouse"): {"bind": "/wheelhouse", "mode": "ro"}},
                                      mem_limit="4g", labels=labels("gradescope-test"))
    try:
        status = container.wait(timeout=900)
        logs = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    assert status["StatusCode"] == 0, logs[-3000:]
    assert "causal-self-attention" in (root / "setup.out").read_text()   # setup.sh ends with `grade exercises`
    raw = (root / "results" / "results.json").read_text()
    doc = json.loads(raw, parse_constant=lambda c: pytest.fail(f"{c} in results.json"))
    check_gradescope(doc)
    assert any("view_without_contiguous" in t["tags"] for t in doc["tests"])
    assert sum(t["max_score"] for t in doc["tests"]) == pytest.approx(110)


# ---------------------------------------------------------------------------------------- PrairieLearn

def test_prairielearn_entry_scores_in_unit_range_with_per_test_points(tmp_path):
    upload(tmp_path / "student", EXAMPLES / "padding_ignored.py")
    assert not (tmp_path / "results").exists()
    proc = run_entry("prairielearn", tmp_path, "--sandbox", "local")
    assert proc.returncode == 0, proc.stderr
    doc, raw = results(tmp_path)           # the entry point created the results folder
    check_prairielearn(doc, raw)
    assert doc["gradable"] is True and 0 < doc["score"] < 1
    assert abs(sum(t["points"] for t in doc["tests"]) / 100 - doc["score"]) < 1e-4
    assert "padding" in doc["message"].lower()


def test_prairielearn_rejected_upload_is_not_gradable_and_keeps_the_attempt(tmp_path):
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "attention.py").write_text("import torch\nclass Attention:\n    pass\n")
    assert run_entry("prairielearn", tmp_path, "--sandbox", "local").returncode == 0
    doc, raw = results(tmp_path)
    check_prairielearn(doc, raw)
    assert doc["gradable"] is False and "CausalSelfAttention" in doc["format_errors"][0]


def test_prairielearn_file_stays_under_1_mb_when_the_student_floods_it(tmp_path):
    folder = tmp_path / "student"
    folder.mkdir()
    source = (SUBMISSIONS / "correct" / "einsum.py").read_text()
    # an exception message of 5 MB in every forward call: the feedback would be far above 1 MB
    (folder / "attention.py").write_text(source + "\n\ndef _huge(self, *a, **k):\n"
                                         "    raise ValueError('\\x1b[31m' + 'x' * 5_000_000)\n"
                                         "CausalSelfAttention.forward = _huge\n")
    assert run_entry("prairielearn", tmp_path, "--sandbox", "local").returncode == 0
    doc, raw = results(tmp_path)
    check_prairielearn(doc, raw)
    assert doc["gradable"] and doc["score"] < 0.2
    assert "\x1b" not in raw.decode()


@pytest.mark.docker
def test_prairielearn_external_grader_image_grades_the_mounted_folder(tmp_path):
    """The real image, run the way PrairieLearn's grader host runs it: /grade mounted, the entry
    point `grade-prairielearn`, network off."""
    import docker
    client = docker.from_env()
    for name, source in (("good", EXAMPLES / "correct.py"), ("bad", SUBMISSIONS / "malformed" / "no_class.py")):
        grade_dir = tmp_path / name
        upload(grade_dir / "student", source)
        (grade_dir / "data").mkdir()
        (grade_dir / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
        client.containers.run(os.environ.get("GRADER_IMAGE", "attention-grader:latest"),
                              entrypoint=["grade-prairielearn"], network_mode="none", remove=True,
                              volumes={str(grade_dir): {"bind": "/grade", "mode": "rw"}}, mem_limit="2g")
        doc, raw = results(grade_dir)
        check_prairielearn(doc, raw)
        if name == "good":
            assert doc["gradable"] and doc["score"] == 1.0
            assert doc["extra_data"]["environment"]["sandbox"] == "image"
        else:
            assert doc["gradable"] is False and doc["format_errors"]


# ------------------------------------------------------------------------------ visibility, both formats



@pytest.mark.unit
def test_hidden_tests_keep_their_details_out_of_what_students_see_now():
    result = result_with_hidden_test()
    gs = formats.gradescope(result)
    check_gradescope(gs)
    assert [t["visibility"] for t in gs["tests"]] == ["visible", "after_due_date"]
    assert "Scores scaled wrongly" in gs["tests"][1]["output"]      # shown with its test, after the date
    assert "Scores scaled wrongly" not in gs["output"] and "Values" not in gs["output"]
    assert "not shown yet" in gs["output"]
    pl = formats.prairielearn(result)
    raw = json.dumps(pl).encode()
    check_prairielearn(pl, raw)
    assert pl["score"] == 0.4 and b"got 1 expected 2" not in raw and b"Scores scaled wrongly" not in raw
    assert pl["tests"][-1]["name"] == "Tests not shown" and pl["tests"][-1]["max_points"] == 60
