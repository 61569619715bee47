"""The local sandbox where courses run it: as root (CI, a server, a container with the Docker
socket) and as an ordinary user. The host attacks themselves are in the attack suite
(tests/submissions/attacks/host_*, graded as root and as an ordinary user); here, what needs more
than one grade or more than `grade FILE`:
- the student's code holds a uid and gid of its own, with no supplementary group, when root grades;
- a warm batch gives no channel between two students through metadata or shared folders;
- the service's tokens file and store, outside every hidden folder, cannot be read by a submission;
- `grade worker` and `grade serve` refuse the local sandbox as root beside a Docker socket, and the
  multi-user commands refuse it where a guarantee is missing, with one line; `grade FILE` notes it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sandbox.confine import STUDENT_ID_BASE, STUDENT_ID_SPAN
from sandbox.local import DOCKER_SOCKETS
from tests.support.as_user import NOBODY
from tests.support.grading import EXAMPLES, KERNEL_LAYER, SUBMISSIONS, grade
from tests.support.serving import Server, new_token

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CI runs as root)")
# A layer with the wrong scale, whose score rises to full marks only if `REACHED` holds anything.
LAYER = (SUBMISSIONS / "attacks" / "host_unix_sockets.py").read_text().split("# attack-end\n", 1)[1]
HEADER = "import math\nimport os\n\nimport torch\nimport torch.nn as nn\n\nREACHED = []\n"
WRONG_SCALE_SCORE = 67.5


def submission(folder: Path, name: str, attack: str) -> Path:
    path = folder / name
    path.write_text(HEADER + attack + LAYER)
    return path


@ROOT_ONLY
def test_as_root_the_students_code_has_a_uid_of_its_own(tmp_path):
    probe = tmp_path / "who.py"
    probe.write_text("import os\nraise RuntimeError('ids %d %d %d %d groups %r' % (*os.getresuid()[:2], "
                     "*os.getresgid()[:2], os.getgroups()))\n")
    graded = grade(probe)
    assert graded.result["status"] == "rejected", graded.terminal
    found = re.search(r"ids (\d+) (\d+) (\d+) (\d+) groups \[\]", " ".join(graded.result["feedback"].split()))
    assert found, graded.result["feedback"]
    ids = {int(i) for i in found.groups()}
    assert len(ids) == 1 and STUDENT_ID_BASE <= ids.pop() < STUDENT_ID_BASE + STUDENT_ID_SPAN


PLANT = '''
import glob
import sysconfig
PLACES = ["/tmp", "/var/tmp", "/dev/shm", os.path.dirname(os.getcwd()), os.path.expanduser("~"),
          sysconfig.get_paths()["purelib"], os.path.join(sysconfig.get_paths()["purelib"], "torch", "__init__.py"),
          os.path.dirname(torch.__file__), "/dev/null"]
for place in PLACES:
    for change in (lambda: os.setxattr(place, "user.channel", b"hello from a"),
                   lambda: os.chmod(place, os.stat(place).st_mode & 0o7777),
                   lambda: open(os.path.join(place, "channel.txt"), "w").write("hello from a")):
        try:
            change()
        except (OSError, NotADirectoryError):
            pass
try:
    os.makedirs("/dev/shm/channel", exist_ok=True)
except OSError:
    pass
'''
READ = '''
import sysconfig
PLACES = ["/tmp", "/var/tmp", "/dev/shm", os.path.dirname(os.getcwd()), os.path.expanduser("~"),
          sysconfig.get_paths()["purelib"], os.path.join(sysconfig.get_paths()["purelib"], "torch", "__init__.py"),
          os.path.dirname(torch.__file__), "/dev/null"]
for place in PLACES:
    try:
        if "user.channel" in os.listxattr(place):
            REACHED.append(place)
    except OSError:
        pass
    if os.path.exists(os.path.join(place, "channel.txt")) or os.path.exists("/dev/shm/channel"):
        REACHED.append(place)
'''


def test_a_warm_batch_has_no_channel_between_two_students(tmp_path):
    """The first student plants marks everywhere it can (attributes, no-op mode changes, files);
    the second, graded next by the same warm sandbox, earns full marks only if it finds one; the
    third, only if it can change a path named to it (OUT, the class folder)."""
    class_folder = tmp_path / "class"
    class_folder.mkdir()
    submission(class_folder, "a_planter.py", PLANT)
    submission(class_folder, "b_reader.py", READ)
    # and one that tries every path named on its stack, in its environment and sys.path (a batch's
    # OUT and class folder among what it would find, were they named there)
    stack = (SUBMISSIONS / "attacks" / "host_paths_named_on_stack.py").read_text()
    block = stack.split("# attack-begin\n", 1)[1].split("# attack-end\n", 1)[0]
    submission(class_folder, "c_stack.py", 'BAIT = "/nonexistent"\n' + block)
    out = tmp_path / "out"
    # The kernel's layers alone: the audit layer would refuse c_stack's frames before it looked.
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(class_folder), "--out", str(out), "--jobs", "1"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **KERNEL_LAYER})
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = {}
    for result in (out / "results").glob("*.json"):
        document = json.loads(result.read_text())
        scores[document["submission"]["name"]] = document["score"]
    assert scores == {"a_planter.py": WRONG_SCALE_SCORE, "b_reader.py": WRONG_SCALE_SCORE,
                      "c_stack.py": WRONG_SCALE_SCORE}, scores
    assert "1 warm sandbox started" in proc.stdout + proc.stderr  # both graded by the one warm server


@ROOT_ONLY
def test_a_submission_cannot_read_the_services_tokens_and_store(tmp_path):
    """--tokens and --store in /var/tmp, outside every folder the grader hides by default."""
    private = Path(tempfile.mkdtemp(prefix="grader-service-", dir="/var/tmp"))
    try:
        tokens_file, store = private / "tokens.json", private / "store"
        a, b = new_token(tokens_file, "course-a"), new_token(tokens_file, "course-b")
        server = Server(tmp_path, "--tokens", str(tokens_file), "--store", str(store), "--slots", "1")
        try:
            assert server.grade(b, (EXAMPLES / "correct.py").read_bytes(), "classmate.py")["state"] == "done"
            attack = f'''
for path in [{str(tokens_file)!r}] + [os.path.join(d, f) for d, _, files in os.walk({str(store)!r}) for f in files]:
    try:
        with open(path) as f:
            REACHED.append(f.read(200))
    except OSError:
        pass
try:
    REACHED += os.listdir({str(store)!r})
except OSError:
    pass
'''
            data = (HEADER + attack + LAYER).encode()
            document = server.grade(a, data, "reader.py")
        finally:
            server.stop()
        assert document["state"] == "done", document
        assert document["result"]["score"] == WRONG_SCALE_SCORE
        assert b.signing_secret not in json.dumps(document)
    finally:
        subprocess.run(["rm", "-rf", str(private)], check=False)


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=120)


@ROOT_ONLY
@pytest.mark.parametrize("command", [["worker", "--broker", "redis://127.0.0.1:9/0"], ["serve", "--port", "0"]],
                         ids=["worker", "serve"])
def test_as_root_beside_a_docker_socket_a_worker_or_the_service_refuses_the_local_sandbox(command):
    assert any(os.path.exists(s) for s in DOCKER_SOCKETS), "scripts/docker-engine starts the engine for the suite"
    proc = _run_cli(*command, "--sandbox", "local")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker socket" in lines[0] and "--allow-weak-sandbox" in lines[0], proc.stderr


def _without_landlock(monkeypatch):
    import sandbox.confine
    monkeypatch.setattr(sandbox.confine, "landlock_abi", lambda libc=None: -1)


def test_a_batch_refuses_a_local_sandbox_without_landlock_in_one_line(monkeypatch, tmp_path):
    from grader.cli import main
    _without_landlock(monkeypatch)
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "a.py").write_text((EXAMPLES / "correct.py").read_text())
    refused = CliRunner().invoke(main, ["batch", str(folder), "--out", str(tmp_path / "out")])
    assert refused.exit_code == 1
    assert refused.output.count("\n") == 1 and "no Landlock" in refused.output, refused.output
    assert not (tmp_path / "out").exists()


def test_grade_file_without_landlock_grades_with_a_note(monkeypatch):
    from grader.cli import main
    _without_landlock(monkeypatch)
    graded = CliRunner().invoke(main, [str(EXAMPLES / "correct.py")])
    assert graded.exit_code == 0, graded.output
    assert "Note: the local sandbox is weaker here: no Landlock" in graded.output
    assert "100 / 100" in graded.output


def test_an_ordinary_user_grades_a_correct_file_in_full():
    """The local sandbox as an ordinary user (no uid of its own to give: seccomp and Landlock hold)."""
    if os.geteuid() != 0:
        graded = grade(EXAMPLES / "correct.py")
    else:
        home = Path(tempfile.mkdtemp(prefix="grade-as-user-"))  # pytest's own tmp folders are root's alone
        os.chown(home, NOBODY, NOBODY)
        copy = home / "correct.py"
        copy.write_text((EXAMPLES / "correct.py").read_text())
        graded = grade(copy, uid=NOBODY, env={"HOME": str(home), "TMPDIR": str(home)})
        subprocess.run(["rm", "-rf", str(home)], check=False)
    assert graded.exit_code == 0 and graded.result["score"] == 100, graded.terminal[-2000:]
