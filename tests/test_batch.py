"""`grade batch`: a class regraded through the real CLI, in warm sandboxes, on real files."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

import exercise as exercises
from tests.support.batching import OWN_TMP, SANDBOXES, BatchRun, batch, start_batch
from tests.support.grading import EXAMPLES, KERNEL_LAYER, SUBMISSIONS, own_label

ISOLATION = SUBMISSIONS / "isolation"
ATTACKS = SUBMISSIONS / "attacks"


def servers_of(pid: int) -> list[int]:
    """The warm local servers that batch process `pid` started."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"sandbox.warm_server" in cmd and ppid == pid:
                found.append(int(entry))
    return found


def leftovers(token: str | None = None) -> list[str]:
    """Grading processes of this session's batches (their environment names OWN_TMP), processes an
    isolation submission marked with this test's `token` (one_slot_full_marks: a test running
    beside it grades its own copies), and grading containers of the image these tests use, still
    there."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                ours = any(m in cmd for m in (b"sandbox.warm_server", b"sandbox.zygote", b"sandbox.harness")) \
                    and str(OWN_TMP).encode() in Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if ours or token and b"leftover-mark" in cmd and token.encode() in cmd:
                found.append(cmd.replace(b"\0", b" ").decode(errors="replace")[:120])
    try:
        import docker

        from sandbox.docker import DockerSandbox
        client = docker.from_env()
        client.ping()
        found += [c.name for c in client.containers.list(all=True, filters=own_label())
                  if c.attrs.get("Config", {}).get("Image") == DockerSandbox().image]
    except Exception:  # noqa: BLE001  (no engine here: only the local processes count)
        pass
    return found


def make_class(folder: Path) -> Path:
    """A class as instructors get one: files, a folder per student, a notebook, broken uploads."""
    folder.mkdir()
    shutil.copy(EXAMPLES / "correct.py", folder / "correct.py")
    shutil.copy(EXAMPLES / "mask_after_softmax.py", folder / "mask_after_softmax.py")
    shutil.copy(EXAMPLES / "notebook.ipynb", folder / "notebook.ipynb")
    shutil.copy(SUBMISSIONS / "malformed" / "syntax_error.py", folder / "syntax_error.py")
    shutil.copy(EXAMPLES / "padding_ignored.py", folder / "<img src=x onerror=alert(1)>.py")
    (folder / "alice").mkdir()
    shutil.copy(SUBMISSIONS / "correct" / "einsum.py", folder / "alice" / "attention.py")
    (folder / "alice" / "helpers.py").write_text("SCALE = 1\n")
    (folder / "bob").mkdir()
    (folder / "bob" / "notes.txt").write_text("I did not finish\n")
    (folder / ".DS_Store").write_text("ignored")
    return folder


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_class_gets_a_gradebook_results_and_a_report(tmp_path, sandbox):
    run = batch(make_class(tmp_path / "class"), tmp_path / "out", "--jobs", "2", "--sandbox", sandbox)
    assert run.exit_code == 0, run.output
    book = run.gradebook()
    assert set(book) == {"correct.py", "mask_after_softmax.py", "notebook.ipynb", "syntax_error.py",
                         "<img src=x onerror=alert(1)>.py", "alice", "bob"}
    expected = {"correct.py": ("graded", "100", ""), "notebook.ipynb": ("graded", "100", ""),
                "alice": ("graded", "100", ""), "mask_after_softmax.py": ("graded", "24", "mask_after_softmax"),
                "<img src=x onerror=alert(1)>.py": ("graded", "88", "padding_ignored"), "syntax_error.py": ("rejected", "0", ""),
                "bob": ("rejected", "0", "")}
    for key, (status, score, bugs) in expected.items():
        assert (book[key]["status"], book[key]["score"], book[key]["bugs"]) == (status, score, bugs), key
        result = run.result(key)  # each result file is the native JSON, and agrees with the gradebook
        assert (result["status"], f"{result['score']:g}") == (status, score)
    assert "no .py or .ipynb" in run.result("bob")["message"]
    html = (run.out / "report.html").read_text()
    assert "The causal mask is applied after the softmax" in html and "The key padding mask is ignored" in html
    assert "&lt;img src=x onerror=alert(1)&gt;.py" in html and "<img src=x" not in html
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert "7 submissions: 5 graded, 2 rejected, 0 errors" in run.output
    assert "Top bugs" in run.output and "graded 7, kept 0" in run.output
    assert "2 warm sandboxes started" in run.output
    assert leftovers() == []


def test_a_rerun_grades_only_new_or_changed_submissions(tmp_path):
    # One slot: what is graded again does not depend on how many grade at once, and each slot of a
    # batch starts a warm sandbox of its own (about 2 s of CPU) for two or three files.
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("a.py", "b.py"):
        shutil.copy(EXAMPLES / "correct.py", folder / name)
    first = batch(folder, tmp_path / "out", "--jobs", "1")
    assert first.exit_code == 0 and "graded 2, kept 0" in first.output, first.output
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out" / "results").iterdir()}

    again = batch(folder, tmp_path / "out", "--jobs", "1")
    assert again.exit_code == 0 and "graded 0, kept 2" in again.output, again.output
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "out" / "results").iterdir()} == stamps
    assert set(again.gradebook()) == {"a.py", "b.py"}

    shutil.copy(EXAMPLES / "mask_after_softmax.py", folder / "b.py")   # a student uploads a new version
    shutil.copy(EXAMPLES / "padding_ignored.py", folder / "d.py")      # a late submission
    changed = batch(folder, tmp_path / "out", "--jobs", "1")
    assert changed.exit_code == 0 and "graded 2, kept 1" in changed.output, changed.output
    book = changed.gradebook()
    assert (book["b.py"]["score"], book["d.py"]["score"], book["a.py"]["score"]) == ("24", "88", "100")

    forced = batch(folder, tmp_path / "out", "--jobs", "1", "--force")
    assert forced.exit_code == 0 and "graded 3, kept 0" in forced.output, forced.output


@pytest.mark.unit
def test_the_grading_key_follows_the_tests_and_their_points(tmp_path):
    ex = exercises.get()
    copy = tmp_path / "exercise"
    shutil.copytree(ex.directory, copy, ignore=shutil.ignore_patterns("__pycache__"))
    same = type(ex)(**{**ex.__dict__, "directory": copy})
    assert same.fingerprint() == ex.fingerprint()
    groups = copy / "groups.py"  # where the tests' points are declared
    changed = groups.read_text().replace("the same for every n_heads\",\n          points=10)",
                                         "the same for every n_heads\",\n          points=12)")
    assert changed != groups.read_text()
    groups.write_text(changed)
    assert same.fingerprint() != ex.fingerprint()


def test_a_grader_failure_is_that_submissions_result_and_a_rerun_retries_it(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        shutil.copy(EXAMPLES / "correct.py", folder / name)
    out = tmp_path / "out"
    process = start_batch(folder, out, "--jobs", "1")
    # Kill the batch's warm sandbox again and again until a submission has been recorded as a grader
    # failure: its grade and its one retry both lose their sandbox.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        for pid in servers_of(process.pid):
            os.kill(pid, signal.SIGKILL)
        try:
            index = json.loads((out / "index.json").read_text())["submissions"]
        except (OSError, ValueError, KeyError):
            index = {}
        if any(e["status"] == "error" for e in index.values()):
            break
        time.sleep(0.1)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 1, output
    book = BatchRun(1, output, out).gradebook()
    assert set(book) == {"a.py", "b.py", "c.py"}, "every submission has a row, failed or not"
    errors = sorted(k for k, row in book.items() if row["status"] == "error")
    assert errors and all(book[k]["score"] == "" for k in errors)
    assert f"to rerun: {', '.join(errors)}" in output
    assert all(row["score"] == "100" for k, row in book.items() if k not in errors)

    rerun = batch(folder, out, "--jobs", "1")
    assert rerun.exit_code == 0, rerun.output
    assert f"graded {len(errors)}, kept {3 - len(errors)}" in rerun.output
    assert all(row["score"] == "100" for row in rerun.gradebook().values())
    assert leftovers() == []


def test_ctrl_c_keeps_what_was_graded_and_a_rerun_finishes(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for i in range(6):
        shutil.copy(EXAMPLES / "mask_after_softmax.py", folder / f"s{i}.py")
    out = tmp_path / "out"
    process = start_batch(folder, out, "--jobs", "1")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "index.json").exists():
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "interrupted" in output and "run the same command again" in output
    run = BatchRun(130, output, out)
    index = run.index()
    assert 1 <= len(index) < 6
    assert set(run.gradebook()) == set(index), "the gradebook lists exactly what was graded"
    assert all(run.result(key)["score"] == 24 for key in index)
    assert leftovers() == []

    rerun = batch(folder, out, "--jobs", "2")
    assert rerun.exit_code == 0, rerun.output
    assert f"graded {6 - len(index)}, kept {len(index)}" in rerun.output
    assert len(rerun.gradebook()) == 6


def one_slot_full_marks(tmp_path: Path, sandbox: str, name: str, copies: int, *extra: str) -> BatchRun:
    """Copies of an isolation submission graded one after another by one slot: each must get 100."""
    folder = tmp_path / "class"
    folder.mkdir()
    token = os.urandom(6).hex()  # this test's own mark on what its copies leave running
    marked = re.sub(r'"(leftover-mark-[0-9a-f]{4})"', rf'"\1-{token}"', (ISOLATION / name).read_text())
    for i in range(copies):
        (folder / f"{i}_{name}").write_text(marked)
    # What they plant goes past the audit layer's refusals (ctypes, programs): the kernel's layers alone.
    run = batch(folder, tmp_path / "out", "--jobs", "1", "--sandbox", sandbox, *extra, env=KERNEL_LAYER)
    assert run.exit_code == 0, run.output
    for key in sorted(run.gradebook()):
        result = run.result(key)
        assert (result["status"], result["score"]) == ("graded", 100), (key, result.get("message"))
    assert leftovers(token) == []
    return run


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_nothing_of_a_submission_survives_into_the_next(tmp_path, sandbox):
    """leave_and_look.py, graded twice in the same warm sandbox, is rejected if it finds what
    an earlier grade left, and leaves it all behind itself (it is rejected if it could not). What
    only the zygote's reset removes: a daemon in its own session and a System V shared memory
    segment. The rest (files in its folder, an environment variable, module state) the design
    already keeps per grade: a new scratch folder, a fresh worker process."""
    run = one_slot_full_marks(tmp_path, sandbox, "leave_and_look.py", copies=2)
    assert "1 warm sandbox started" in run.output, "both were graded in the same warm sandbox"


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_submission_that_changes_the_zygote_leaves_the_next_one_a_fresh_sandbox(tmp_path, sandbox):
    """tamper_with_zygote.py lowers the zygote's open-files limit and priority, which later workers
    would inherit, and is rejected if it finds such a change from an earlier grade. The reset sees
    the change, so each of the two is graded by a fresh server. The local sandbox run by root
    gives the workers a uid of their own: the change is refused, and one server grades both."""
    run = one_slot_full_marks(tmp_path, sandbox, "tamper_with_zygote.py", copies=2)
    refused = sandbox == "local" and os.geteuid() == 0
    assert f"{1 if refused else 2} warm sandbox{'' if refused else 'es'} started" in run.output


@pytest.fixture
def planted_keys():
    """After the test: the kernel keys with the isolation submission's mark that this user can see
    (a key left on the machine), removed so that a failure does not spoil the next run."""
    import ctypes
    found: list[str] = []
    yield found
    with open("/proc/keys") as f:
        lines = [line for line in f if "leftover-mark-7f3a" in line]
    for line in lines:
        ctypes.CDLL(None).syscall(250 if os.uname().machine == "x86_64" else 219, 21, int(line.split()[0], 16))
    found += lines
    assert not lines, f"kernel keys left on the machine: {lines}"


@pytest.mark.parametrize("mode", ["warm", "cold"])
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_kernel_state_of_one_grade_does_not_reach_the_next(tmp_path, sandbox, mode, planted_keys):
    """keyring_ioprio_mqueue.py, graded twice by one slot, is rejected if it finds a kernel key,
    an idle I/O priority or a POSIX message queue left by an earlier grade, and plants them all
    itself: keys and queues are refused to workers (seccomp), and a warm zygote whose I/O priority
    was changed is replaced (the reset compares it). Cold, a key would reach the next grade through
    the user's keyring just the same."""
    one_slot_full_marks(tmp_path, sandbox, "keyring_ioprio_mqueue.py", 2, *(["--cold"] if mode == "cold" else []))


@pytest.mark.parametrize("sandbox", [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=[pytest.mark.docker, pytest.mark.xfail(
        strict=True, reason="known hole (issue 39): in the grader's image the zygote runs as the student's uid "
                            "and cannot make a PID namespace per worker, so a slot's container keeps one counter")])])
def test_the_pid_counter_one_grade_moves_does_not_reach_the_next(tmp_path, sandbox):
    """pid_counter.py, graded twice by one slot, is rejected if its worker's PID or the last PID the
    kernel handed out is past what its own grade used, and forks 320 times itself. Each worker is
    PID 1 of a PID namespace of its own, with a /proc of its own: the second grade starts at 1."""
    one_slot_full_marks(tmp_path, sandbox, "pid_counter.py", copies=2)


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_hostile_submissions_do_not_stop_the_batch_or_spoil_the_next_grade(tmp_path, sandbox):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("kill_everything", "kill_parent", "daemon_double_fork", "fake_report_files", "close_all_fds"):
        shutil.copy(ATTACKS / f"{name}.py", folder / f"{name}.py")
    shutil.copy(EXAMPLES / "correct.py", folder / "zz_correct.py")
    shutil.copy(EXAMPLES / "mask_after_softmax.py", folder / "zz_mask_after_softmax.py")
    # The kernel's layers alone: with the audit layer, the daemon would be refused before it starts.
    run = batch(folder, tmp_path / "out", "--jobs", "1", "--sandbox", sandbox, env=KERNEL_LAYER)
    assert run.exit_code == 0, run.output
    book = run.gradebook()
    assert len(book) == 7 and all(row["status"] in ("graded", "rejected") for row in book.values()), book
    assert (book["zz_correct.py"]["score"], book["zz_mask_after_softmax.py"]["score"]) == ("100", "24")
    # both are a layer without its causal mask under the attack: its interface and parameter count
    assert book["daemon_double_fork.py"]["score"] == "20" and book["fake_report_files.py"]["score"] == "20"
    assert leftovers() == []


def test_a_submission_cannot_read_its_classmates_files_or_results():
    # Not under /tmp, which the sandbox hides anyway: where an instructor keeps a class.
    base = Path(tempfile.mkdtemp(prefix=".grade-batch-test-", dir=Path.home()))
    try:
        _peek_at_classmates(base / "class", base / "out")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _peek_at_classmates(folder: Path, out: Path) -> None:
    folder.mkdir()
    shutil.copy(EXAMPLES / "correct.py", folder / "a_classmate.py")
    peek = (EXAMPLES / "correct.py").read_text() + f'''
for _path in ({str(folder / "a_classmate.py")!r}, {str(out / "index.json")!r}, {str(out / "results")!r}):
    try:
        open(_path).close() if not _path.endswith("results") else __import__("os").listdir(_path)
    except OSError:
        continue
    raise RuntimeError("could read " + _path)
'''
    (folder / "b_peek.py").write_text(peek)
    run = batch(folder, out, "--jobs", "1")
    assert run.exit_code == 0, run.output
    result = run.result("b_peek.py")
    assert (result["status"], result["score"]) == ("graded", 100), result.get("message")


def test_a_folder_without_submissions_is_a_clear_error_and_writes_nothing(tmp_path):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "notes.txt").write_text("no code here\n")
    run = batch(tmp_path / "class", tmp_path / "out")
    assert run.exit_code == 1
    assert "no submissions in" in run.output and "no .py or .ipynb file" in run.output
    assert not (tmp_path / "out").exists()
