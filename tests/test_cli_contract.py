"""The command line and the native result JSON, exactly as DESIGN.md's contract says."""
import hashlib
import json
import subprocess
import sys

from tests.support.grading import EXAMPLES, grade

CORRECT = EXAMPLES / "correct.py"


def test_native_json_has_every_contract_field(grade_cached):
    graded = grade_cached(CORRECT)
    result = graded.result
    assert result["schema"] == 1
    assert result["exercise"] == "causal-self-attention"
    assert result["submission"] == {"name": "correct.py",
                                    "sha256": hashlib.sha256(CORRECT.read_bytes()).hexdigest()}
    assert result["status"] == "graded" and isinstance(result["score"], float)
    assert result["max_score"] == 100.0
    assert isinstance(result["duration_s"], float) and result["duration_s"] > 0
    assert {"grader", "python", "torch", "sandbox"} <= set(result["environment"])
    assert result["environment"]["torch"] == "2.13.0" and result["environment"]["sandbox"] == "local"
    assert isinstance(result["bugs"], list)
    assert "Score" in result["feedback"] and "100 / 100" in result["feedback"]
    for test in result["tests"]:
        assert set(test) >= {"id", "name", "status", "score", "max_score", "feedback", "bugs"}
        assert test["status"] in {"passed", "failed", "error", "timeout", "skipped"}
    assert abs(sum(t["max_score"] for t in result["tests"]) - 100) < 1e-6


def test_json_to_a_file_and_feedback_on_the_terminal_with_the_profile(tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, "-m", "grader", str(CORRECT), "--json", str(out), "--profile"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0
    result = json.loads(out.read_text())
    assert result["score"] == 100
    assert "Score" in proc.stdout and "100 / 100" in proc.stdout
    # Where the time went: the host's phases, the sandbox's, each test file's, on one time line.
    phases = {p["name"]: p for p in result["phases"]}
    for name in ("host: Python start and imports", "sandbox", "harness: torch import", "worker: submission loaded",
                 "collection", "tests test_01_interface", "tests test_07_advice", "diagnosis: before the tests",
                 "host: scored and rendered"):
        assert name in phases, name
        assert 0 <= phases[name]["start_s"] <= phases[name]["end_s"]
    sandbox = phases["sandbox"]
    for name in ("harness: torch import", "collection", "tests test_04_padding"):
        assert sandbox["start_s"] <= phases[name]["start_s"] <= phases[name]["end_s"] <= sandbox["end_s"], name
    assert phases["tests test_01_interface"]["end_s"] <= phases["tests test_02_worked_example"]["start_s"]
    assert "Where the time went" in proc.stderr and "tests test_03_matches_mha" in proc.stderr


def test_rejected_submission_still_exits_zero_and_writes_json(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    graded = grade(bad)
    assert graded.exit_code == 0 and graded.result["status"] == "rejected" and graded.result["score"] == 0


def test_help_reads_well():
    proc = subprocess.run([sys.executable, "-m", "grader", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "grade submit.py" in proc.stdout and "Exit status" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "grader", "file", "--help"], capture_output=True, text=True)
    assert "--json OUT" in proc.stdout and "--sandbox" in proc.stdout
