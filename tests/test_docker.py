"""The Docker sandbox against the real engine: same grades as the local sandbox, and a container
that holds against network use, memory and fork bombs, endless loops and output floods.

These tests need the engine and the image (scripts/test sets both up). They fail, not skip, when
either is missing: on this project's CI they must run.
"""
import os
import signal
import socket
import subprocess
import sys
import time

import docker
import pytest

from grader.grading import CALL_LIMIT
from tests.support.corpus import LOCAL_CORPORA, graded_in_corpus, in_docker
from tests.support.grading import EXAMPLES, KERNEL_LAYER, OWNER, SUBMISSIONS, grade, own_label

pytestmark = pytest.mark.docker
CORRECT = (SUBMISSIONS / "correct" / "manual_masked_fill.py").read_text()
FORWARD = "def forward(self, x, key_padding_mask=None):"

# The cold path in both sandboxes (`grade FILE`): a correct file, a mistake, a notebook, a
# rejection and a file that exits. Every file of the corpora is held against Docker's warm grade below.
SAME = [EXAMPLES / "correct.py", EXAMPLES / "padding_ignored.py", SUBMISSIONS / "malformed" / "no_class.py",
        SUBMISSIONS / "hostile" / "exit_in_forward.py", SUBMISSIONS / "correct" / "notebook_with_magics.ipynb"]
IN_DOCKER = {corpus.name: in_docker(corpus) for corpus in LOCAL_CORPORA}


def leftovers() -> list:
    client = docker.from_env()
    return client.containers.list(all=True, filters=own_label()) + client.volumes.list(filters=own_label())


def in_forward(code: str) -> str:
    body = "".join(f"\n        {line}" for line in code.strip().splitlines())
    return CORRECT.replace(FORWARD, FORWARD + body)


@pytest.mark.parametrize("path", SAME, ids=[p.name for p in SAME])
def test_both_sandboxes_give_the_same_grade(grade_cached, path):
    """`grade FILE --sandbox docker` against the local sandbox's result: the corpus's (graded in
    this run by a warm batch) for a file of a corpus, else `grade FILE`'s."""
    local = graded_in_corpus(path) or grade_cached(path).result
    boxed = grade_cached(path, "--sandbox", "docker")
    assert boxed.exit_code == 0, boxed.terminal
    assert boxed.result["environment"]["sandbox"] == "docker"
    for key in ("status", "score", "max_score", "bugs", "message"):
        assert boxed.result[key] == local[key], f"{key}\n{explained(boxed)}"
    assert summary(boxed.result) == summary(local), explained(boxed)


@pytest.mark.parametrize("corpus,key", [(corpus, key) for corpus in LOCAL_CORPORA for key in sorted(corpus.files)],
                         ids=[f"{corpus.name}:{key}" for corpus in LOCAL_CORPORA for key in sorted(corpus.files)])
def test_every_file_of_the_corpora_gets_the_same_grade_in_docker(corpus, key):
    """Each correct, buggy, outside-the-catalog, rejected, hostile and clustered file of
    tests/submissions (both exercises), graded by warm batches in both sandboxes with the same draws:
    the same verdict, score, bugs, message and the same tests passed, with the same points."""
    local, boxed = corpus[key], IN_DOCKER[corpus.name][key]
    assert boxed["environment"]["sandbox"] == "docker" and local["environment"]["sandbox"] == "local"
    for field in ("status", "score", "max_score", "bugs", "message"):
        assert boxed[field] == local[field], f"{field}: {boxed[field]!r} in Docker, {local[field]!r} in local"
    assert summary(boxed) == summary(local), "\n".join(
        f"{a['id']}: {a['status']} {a['score']} in Docker ({a['feedback'][:200]!r}), {b['status']} {b['score']} in local "
        f"({b['feedback'][:200]!r})" for a, b in zip(boxed["tests"], local["tests"]) if summary({"tests": [a]}) != summary({"tests": [b]}))


def summary(result: dict) -> list[tuple]:
    """Each test of a result: its id, status and points."""
    return [(t["id"], t["status"], t["score"]) for t in result["tests"]]


def explained(graded) -> str:
    """What a grade that differs said about itself: its notes, each test that did not pass with the
    start of its feedback, and where its time went, so that a failure explains itself in CI's log."""
    result = graded.result or {}
    lines = [f"notes: {result.get('notes')}", f"duration_s: {result.get('duration_s')}"]
    lines += [f"{t['id']}: {t['status']} {t['score']}/{t['max_score']}: {str(t.get('feedback', ''))[:300]}"
              for t in result.get("tests", []) if t["status"] != "passed"]
    lines += [f"phase {p.get('name')}: {p.get('start_s')}..{p.get('end_s')}" for p in result.get("phases", [])]
    return "\n".join(lines)


def test_no_network_inside_the_container(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    path = tmp_path / "network.py"
    path.write_text(CORRECT + f"""
import socket as _socket
_names = [name for _, name in _socket.if_nameindex()]
if _names != ["lo"]:
    raise RuntimeError(f"network interfaces: {{_names}}")
try:
    _socket.create_connection(("127.0.0.1", {port}), timeout=3)
    raise RuntimeError("the grader's machine is reachable")
except OSError:
    pass
""")
    graded = grade(path, "--sandbox", "docker")
    server.close()
    assert graded.result["status"] == "graded", graded.result["message"]
    assert graded.result["score"] == 100, explained(graded)


@pytest.mark.parametrize("name,code,says", [
    # It keeps what it took (a leak across calls): the first call fills the worker up to its limit,
    # every later one fails at once, as a real leak does, instead of filling 3 GiB again per call.
    ("memory_bomb", "globals().setdefault('_hog', []).extend(bytearray(1 << 28) for _ in range(64))", "memory limit"),
    ("fork_bomb", "import os\nwhile True:\n    os.fork()", "process-count limit"),
    ("endless_loop", "while True:\n    pass", "did not finish within"),
    ("print_flood", "for _ in range(20):\n    print('x' * 10_000_000)", "printed more than"),
])
def test_limits_hold_and_say_which_limit_was_hit(tmp_path, name, code, says):
    path = tmp_path / f"{name}.py"
    path.write_text(in_forward(code))
    # The container's limits themselves: the audit layer would refuse the fork bomb's first fork.
    # The loop meets the host's call limit of 1 s (grader.grading.CALL_LIMIT): the exercise's 4 s is
    # the same number in both sandboxes, the host's to send (test_pure checks it).
    env = {**KERNEL_LAYER, **({CALL_LIMIT: "1"} if name == "endless_loop" else {})}
    graded = grade(path, "--sandbox", "docker", "--time-limit", "60", env=env)
    assert graded.exit_code == 0, graded.terminal
    assert graded.seconds < 60
    result = graded.result
    assert result["status"] == "graded" and result["score"] <= 5
    assert any(says in t["feedback"] for t in result["tests"]), [t["feedback"] for t in result["tests"]][:3]
    assert leftovers() == []


def test_a_grade_beside_another_keeps_its_own_process_limit(tmp_path):
    """The kernel counts processes per uid across containers. One grade holds all the processes
    its limit lets it start; a correct solution that starts a few threads, graded meanwhile in
    another container, still gets full marks (with one student uid in every container, its
    workers could start no thread and every test failed)."""
    holder = tmp_path / "holder.py"
    holder.write_text(CORRECT + """
import os as _os, time as _time
for _ in range(300):
    try:
        _pid = _os.fork()
    except OSError:
        break
    if _pid == 0:
        _os.setsid()
        _time.sleep(60)
        _os._exit(0)
_time.sleep(12)
""")
    victim = tmp_path / "threads.py"
    victim.write_text(CORRECT + """
import threading as _threading
_threads = [_threading.Thread(target=sum, args=([1, 2],)) for _ in range(8)]
for _thread in _threads:
    _thread.start()
for _thread in _threads:
    _thread.join()
""")
    owner = {"GRADER_OWNER": f"{OWNER}-holder"}
    argv = [sys.executable, "-m", "grader", str(holder), "--sandbox", "docker", "--quiet"]
    holding = subprocess.Popen(argv, env={**os.environ, **KERNEL_LAYER, **owner},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client, deadline = docker.from_env(), time.monotonic() + 60
        while time.monotonic() < deadline:  # until the holder's container runs its processes
            mine = client.containers.list(filters={"label": f"attention-grader.owner={owner['GRADER_OWNER']}"})
            if any(len(c.top()["Processes"] or ()) >= 60 for c in mine if c.status == "running"):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the holder's container never ran 60 processes")
        graded = grade(victim, "--sandbox", "docker")
        assert holding.poll() is None, "the holder finished before the other grade did: the test proves nothing"
    finally:
        holding.wait(timeout=120)
    assert graded.result["status"] == "graded", graded.terminal
    assert graded.result["score"] == 100, explained(graded)


def test_student_cannot_read_the_tests_or_the_reference(tmp_path):
    path = tmp_path / "snoop.py"
    path.write_text(CORRECT + """
import glob, os
_site = glob.glob("/opt/venv/lib/python3*/site-packages")[0]
if "exercise" not in os.listdir(_site):
    raise RuntimeError("the exercise package is not where this test looks")
for _path in [os.path.join(_site, "exercise", "causal_self_attention", "reference.py"),
              os.path.join(_site, "exercise", "causal_self_attention", "tests", "test_03_matches_mha.py")]:
    try:
        open(_path).read()
    except PermissionError:
        continue
    raise RuntimeError(f"readable: {_path}")
""")
    graded = grade(path, "--sandbox", "docker")
    assert graded.result["status"] == "graded", graded.result["message"]
    assert graded.result["score"] == 100


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_unreachable_engine_is_a_one_line_error():
    proc = _cli(EXAMPLES / "correct.py", "--sandbox", "docker", env={"DOCKER_HOST": "unix:///tmp/no-such-docker.sock"})
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "scripts/docker-engine" in proc.stderr


def test_missing_image_is_a_one_line_error():
    proc = _cli(EXAMPLES / "correct.py", "--sandbox", "docker", env={"GRADER_IMAGE": "attention-grader:no-such-tag"})
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "scripts/build-images" in proc.stderr


def test_ctrl_c_removes_the_container(tmp_path):
    path = tmp_path / "slow.py"
    path.write_text(in_forward("while True:\n    pass"))
    proc = subprocess.Popen([sys.executable, "-m", "grader", str(path), "--sandbox", "docker"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    client = docker.from_env()
    while time.monotonic() < deadline and not any(
            c.status == "running" for c in client.containers.list(filters=own_label())):
        time.sleep(0.2)
    assert leftovers(), "the grade never started a container"
    proc.send_signal(signal.SIGINT)  # while its container runs
    proc.wait(timeout=60)
    assert leftovers() == []


def test_torch_compile_without_a_compiler_in_the_image_runs_uncompiled_for_full_marks():
    """torch.compile runs the layer as written, uncompiled (the image has no C++ compiler for
    inductor anyway): a correct solution gets full marks within the default time limit."""
    graded = grade(SUBMISSIONS / "correct" / "torch_compile_forward.py", "--sandbox", "docker", timeout=300)
    result = graded.result
    assert graded.exit_code == 0 and result["status"] == "graded", graded.terminal[-2000:]
    assert [t["id"] for t in result["tests"] if t["status"] != "passed"] == []
    assert result["score"] == 100
