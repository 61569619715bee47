"""Hostile input through the real CLI: a hostile class folder in one batch run, and hostile files for
`grade FILE`, `--format gradescope|prairielearn` and both `grade platform` entry points.

Whatever the student controls (a file name, an exception message, a link, a file's size, a folder's
depth, a notebook's magics, a source that CPython compiles slowly) becomes that one submission's
result with a reason: never a traceback, an `error` status or a stopped batch.
"""
from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests.support.batching import SANDBOXES, batch
from tests.support.grading import EXAMPLES, ROOT, SUBMISSIONS, grade
from tests.support.printable import raw_text

ATTACKS = SUBMISSIONS / "attacks"
CORRECT = (EXAMPLES / "correct.py").read_text()
NOT_UTF8 = os.fsdecode(b"M\xfcller.py")          # a name from an old zip: Latin-1, not UTF-8


def slow_to_compile() -> str:
    """A call with tens of thousands of keyword arguments: CPython's compiler takes quadratic time
    on it (measured: 1.7 s for 20,000, over 10 s for 65,000), within the 512 KiB source limit."""
    return "f(" + ",".join(f"k{i:x}=1" for i in range(65_000)) + ")\n"


def magic_notebook(path: Path, magics: int = 100_000) -> None:
    cells = [nbformat.v4.new_code_cell("%matplotlib inline\n" * magics), nbformat.v4.new_code_cell(CORRECT)]
    path.write_text(nbformat.writes(nbformat.v4.new_notebook(cells=cells)))


def hostile_class(folder: Path, sandbox: str = "local") -> dict[str, str]:
    """A class folder of hostile entries beside honest ones; the status each must get. The file
    that CPython compiles slowly is in the local sandbox's class only: the compile check runs on
    the host before any sandbox (grader.submission), and it costs 10 s of CPU each time."""
    folder.mkdir()
    (folder / "alice.py").write_text(CORRECT)
    (folder / NOT_UTF8).write_text(CORRECT)
    (folder / "x;=1+1;.py").write_text(CORRECT)
    shutil.copy(ATTACKS / "surrogate_message_at_import.py", folder / "surrogate.py")
    shutil.copy(ATTACKS / "bidi_c1_and_surrogates_in_messages.py", folder / "bidi.py")
    with open(folder / "huge.py", "wb") as f:   # sparse: 200 GB long, nothing written
        f.truncate(200 << 30)
    deep = folder / "deep"
    deep.mkdir()
    os.chdir(deep)
    try:
        for _ in range(1200):
            os.mkdir("d")
            os.chdir("d")
        Path("attn.py").write_text(CORRECT)
    finally:
        os.chdir(ROOT)
    (folder / "eve.py").symlink_to(folder / "alice.py")          # a classmate's file
    (folder / "mallory.py").symlink_to("/etc/passwd")            # any readable file
    (folder / "carol" / "work").mkdir(parents=True)              # a link within her own folder
    (folder / "carol" / "work" / "attention.txt").write_text(CORRECT)
    (folder / "carol" / "attn.py").symlink_to("work/attention.txt")
    (folder / "dave").mkdir()                                    # a link out of his folder
    (folder / "dave" / "attn.py").symlink_to(folder / "alice.py")
    magic_notebook(folder / "magics.ipynb")
    expected = {"alice.py": "graded", NOT_UTF8: "graded", "x;=1+1;.py": "graded", "surrogate.py": "rejected",
                "bidi.py": "graded", "huge.py": "rejected", "deep": "rejected", "eve.py": "rejected",
                "mallory.py": "rejected", "carol": "graded", "dave": "rejected", "magics.ipynb": "graded"}
    if sandbox == "local":
        (folder / "slow.py").write_text(slow_to_compile())
        expected["slow.py"] = "rejected"
    return expected


@pytest.fixture
def class_folder(tmp_path):
    """The hostile class folder, removed after the test: pytest's own clean-up of old temp folders
    recurses, and 1,200 levels would stop every later session's start."""
    yield tmp_path / "class"
    subprocess.run(["rm", "-rf", str(tmp_path / "class")], check=False)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_hostile_class_gives_each_entry_its_own_row_and_grades_the_rest(tmp_path, class_folder, sandbox):
    expected = hostile_class(class_folder, sandbox)
    run = batch(class_folder, tmp_path / "out", "--jobs", "2", "--sandbox", sandbox, timeout=900)
    assert run.exit_code == 0, run.output[-3000:]
    assert "Traceback" not in run.output
    index = run.index()
    assert {key: entry["status"] for key, entry in index.items()} == expected
    full = [k for k in ("alice.py", NOT_UTF8, "x;=1+1;.py", "carol", "magics.ipynb")]
    assert all(run.result(k)["score"] == 100 for k in full), {k: run.result(k)["score"] for k in full}
    reasons = {k: run.result(k)["message"] for k, status in expected.items() if status == "rejected"}
    assert "bytes; the limit is" in reasons["huge.py"]
    assert "nested more than" in reasons["deep"]
    assert "is a link" in reasons["eve.py"] and "is a link" in reasons["mallory.py"]
    assert "points outside your upload" in reasons["dave"]
    if "slow.py" in expected:
        assert "to compile" in reasons["slow.py"]
    assert "ValueError" in reasons["surrogate.py"]
    # Nothing of /etc/passwd, and no raw control text, in any file written or on the screen.
    written = {p: p.read_text() for p in run.out.rglob("*") if p.is_file() and p.name != ".lock"}
    assert not [p for p, text in written.items() if "root:x:0:0" in text]
    assert "root:x:0:0" not in run.output
    for path in run.out.glob("results/*.json"):
        assert not raw_text(json.loads(path.read_text()), ""), path
    assert not raw_text(None, run.output + written[run.out / "report.html"] + written[run.out / "gradebook.csv"])
    # The cell a spreadsheet splitting at ';' would run is guarded where it starts.
    assert "x;'=1+1;.py" in run.gradebook()
    assert "M\\udcfcller.py" in run.gradebook()       # the byte that is not UTF-8, shown as its escape


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("attack", ["surrogate_message_at_import", "bidi_c1_and_surrogates_in_messages",
                                    "invisible_characters_in_messages"])
def test_grade_file_writes_a_clean_result_in_every_format(tmp_path, attack):
    """Graded once, in the native format; the platforms' formats are made from that result by the
    code `--format` runs after the grade (grader.formats), here on the same result: grading twice
    more proved nothing else (the `grade platform` entry points, below, grade these attacks in the
    platforms' formats too)."""
    from grader import formats
    from grader.result import GradeResult
    submission = tmp_path / NOT_UTF8
    shutil.copy(ATTACKS / f"{attack}.py", submission)
    ran = cli(str(submission), "--format", "native", "--json", str(tmp_path / "out.json"))
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr[-3000:]
    native = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert not raw_text(native, ran.stdout + ran.stderr)
    for fmt in ("gradescope", "prairielearn"):
        written = formats.dumps(formats.to_format(GradeResult.from_dict(native), fmt))
        assert not raw_text(json.loads(written), ""), fmt


# Each platform: an upload rejected at import, and one graded with a hostile message (each of the
# two graded attacks on one platform: every format of every attack's result is checked above).
@pytest.mark.parametrize("platform,upload,graded", [("gradescope", "submission", "bidi_c1_and_surrogates_in_messages"),
                                                    ("prairielearn", "student", "invisible_characters_in_messages")])
def test_platform_entry_points_write_their_results_for_hostile_uploads(tmp_path, platform, upload, graded):
    for case, attack in (("import", "surrogate_message_at_import"), ("forward", graded)):
        root = tmp_path / case
        (root / upload).mkdir(parents=True)
        shutil.copy(ATTACKS / f"{attack}.py", root / upload / NOT_UTF8)
        ran = cli("platform", platform, "--root", str(root), "--sandbox", "local")
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr[-3000:]
        assert not raw_text(json.loads((root / "results" / "results.json").read_text(encoding="utf-8")),
                            ran.stdout + ran.stderr)


INVISIBLE = {"\u200b": r"\u200b", "\u2060": r"\u2060", "\u00ad": r"\xad", "\ufeff": r"\ufeff",
             "\u2028": r"\u2028", "\u2029": r"\u2029", "\U000e0031": r"\U000e0031", "\ue000": r"\ue000",
             "\u3164": r"\u3164"}


def test_grade_file_shows_each_invisible_character_of_a_message_as_its_escape(tmp_path):
    """The student's exception message hides characters that print nothing: the terminal and the
    JSON show each as the escape Python writes for it, where it was, and never the character."""
    submission = tmp_path / "attn.py"
    shutil.copy(ATTACKS / "invisible_characters_in_messages.py", submission)
    ran = subprocess.run([sys.executable, "-m", "grader", str(submission), "--json", str(tmp_path / "out.json")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    doc = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    shown = doc["feedback"] + ran.stdout
    assert not [ch for ch in INVISIBLE if ch in json.dumps(doc, ensure_ascii=False) + ran.stdout + ran.stderr]
    assert [escaped for escaped in INVISIBLE.values() if escaped not in shown] == []
    assert r"ValueError: expected\u200b shape\u200c\u200d\u2060 ok\xad \ufeffBOM" in ran.stdout
    assert not raw_text(doc, ran.stdout + ran.stderr)


def test_a_batch_tells_names_that_read_the_same_apart_and_flags_them(tmp_path):
    """`alice.py`, `alice` + a zero-width space + `.py`, and `аlice.py` with a Cyrillic а: three
    students (or one under three names), three rows that must not read the same anywhere, and a
    notice to the instructor on the terminal and in the report."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text(CORRECT)
    (folder / "alice\u200b.py").write_text("import torch\n")            # no class: rejected, quickly
    (folder / "\u0430lice.py").write_text("print('hello')\n")
    (folder / "bob.py").write_text("x = 1\n")
    run = batch(folder, tmp_path / "out", "--jobs", "1", "--sandbox", "local")
    assert run.exit_code == 0, run.output[-3000:]
    shown = ["alice.py", r"alice\u200b.py", r"\u0430lice.py"]
    assert sorted(run.gradebook()) == sorted([*shown, "bob.py"])
    assert run.gradebook()["alice.py"]["score"] == "100"
    # The raw names stay the index's keys (what a rerun matches); every result shows its name escaped.
    assert set(run.index()) == {"alice.py", "alice\u200b.py", "\u0430lice.py", "bob.py"}
    assert run.result("alice\u200b.py")["submission"]["name"] == r"alice\u200b.py"
    assert run.result("\u0430lice.py")["submission"]["name"] == r"\u0430lice.py"
    notice = [line for line in run.output.splitlines() if "Names that read the same" in line]
    assert len(notice) == 1 and all(name in notice[0] for name in shown) and "bob.py" not in notice[0], run.output
    report = (run.out / "report.html").read_text(encoding="utf-8")
    alert = report[report.index('id="lookalikes"'):]
    alert = alert[:alert.index("</div>")]
    assert all(f"<code>{html.escape(name)}</code>" in alert for name in shown) and "bob.py" not in alert
    listing = report[report.index("<h2>Submissions</h2>"):]
    for name in shown:   # the submissions table lists each under its own name
        assert listing.count(f"<code>{html.escape(name)}</code></a>") == 1, name
    assert not raw_text(None, run.output + report + (run.out / "gradebook.csv").read_text(encoding="utf-8"))
    assert "\u0430" not in run.output + report


def test_grade_file_shows_a_mixed_alphabet_name_escaped(tmp_path):
    submission = tmp_path / "\u0430lice.py"            # a Cyrillic а among Latin letters
    shutil.copy(EXAMPLES / "correct.py", submission)
    ran = cli(str(submission), "--json", str(tmp_path / "out.json"), "--format", "gradescope")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert r"\u0430lice.py" in ran.stdout and "\u0430" not in ran.stdout
    assert "\u0430" not in (tmp_path / "out.json").read_text(encoding="utf-8")


def test_platform_upload_with_a_link_out_of_it_is_rejected_unread(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "attn.py").symlink_to("/etc/passwd")
    ran = cli("platform", "gradescope", "--root", str(tmp_path), "--sandbox", "local")
    results = (tmp_path / "results" / "results.json").read_text()
    assert ran.returncode == 0 and "points outside your upload" in results
    assert "root:x:0:0" not in results + ran.stdout + ran.stderr


def test_grade_file_cannot_read_the_classmates_beside_it():
    """A folder of a class outside /tmp (which is hidden anyway): alice's solution and her result
    lie next to the graded file, which tries to run the one and print the other. The folder is made
    in the checkout's tests/, readable to a grade like the checkout's root, where the attack suite
    (which may run meanwhile) does not watch for changes."""
    folder = Path(tempfile.mkdtemp(prefix=".classmates-", dir=ROOT / "tests"))
    try:
        (folder / "alice.py").write_text(CORRECT)
        (folder / "results").mkdir()
        (folder / "results" / "alice.json").write_text('{"score": 100, "secret": "ALICE-RESULT"}')
        attack = (folder / "mallory.py")
        attack.write_text(
            "import torch.nn as nn\n\n\n"
            "class CausalSelfAttention(nn.Module):\n"
            "    def __init__(self, dim, n_heads):\n        super().__init__()\n"
            "        self.qkv = nn.Linear(dim, 3 * dim)\n        self.proj = nn.Linear(dim, dim)\n\n"
            "    def forward(self, x, key_padding_mask=None):\n        return self.proj(x)\n\n\n"
            "try:\n"
            f"    print(open({str(folder / 'results' / 'alice.json')!r}).read())\n"
            f"    exec(open({str(folder / 'alice.py')!r}).read())\n"
            "except OSError as err:\n    print('blocked', err)\n")
        graded = grade(attack)
        assert graded.exit_code == 0 and graded.result["status"] == "graded", graded.terminal[-3000:]
        assert graded.result["score"] < 100
        assert "ALICE-RESULT" not in json.dumps(graded.result) + graded.terminal
    finally:
        shutil.rmtree(folder)
