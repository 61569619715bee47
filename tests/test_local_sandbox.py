"""The local sandbox's isolation, seen from a submission: no network, limits applied, nothing left."""
import os
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from grader.grading import CALL_LIMIT
from tests.support.grading import KERNEL_LAYER, SUBMISSIONS, grade

CORRECT = (SUBMISSIONS / "correct" / "manual_masked_fill.py").read_text()


def test_student_code_cannot_reach_a_server_on_this_machine(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted, done = [], threading.Event()

    def accept():
        while not done.is_set():
            try:
                accepted.append(server.accept())
            except TimeoutError:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    path = tmp_path / "phones_home.py"
    path.write_text(CORRECT + f"""
import socket as _socket
try:
    _socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"leak")
    raise RuntimeError("NETWORK REACHABLE")
except OSError:
    pass
""")
    graded = grade(path)
    done.set()
    thread.join()
    server.close()
    assert accepted == []
    assert graded.result["status"] == "graded", graded.result["message"]
    assert graded.result["score"] == 100


def test_memory_bomb_is_stopped_by_the_memory_limit(tmp_path):
    path = tmp_path / "memory_bomb.py"
    path.write_text(CORRECT.replace("def forward(self, x, key_padding_mask=None):",
                                    "def forward(self, x, key_padding_mask=None):\n"
                                    "        hog = bytearray(8 << 30)"))
    graded = grade(path, "--time-limit", "60")
    result = graded.result
    assert result["status"] == "graded" and result["score"] <= 5
    assert any("MemoryError" in t["feedback"] for t in result["tests"])


def test_no_process_of_the_grade_outlives_it(tmp_path):
    # The daemon execs `sleep` with a unique duration, so its command line finds it afterwards.
    token = f"600.{uuid.uuid4().int % 10**9}"
    path = tmp_path / "daemon.py"
    path.write_text(CORRECT + f"""
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "{token}"])
    os._exit(0)
""")
    graded = grade(path, env=KERNEL_LAYER)  # the kernel's layers: the audit layer would refuse the fork
    assert graded.result["status"] == "graded"
    time.sleep(0.5)
    survivors = subprocess.run(["pgrep", "-f", f"sleep {token}"], capture_output=True, text=True)
    assert survivors.stdout.strip() == ""


def test_student_code_sees_only_its_own_processes(tmp_path):
    # With its own /proc, the worker cannot reach the harness's pipes through /proc/<pid>/fd.
    path = tmp_path / "proc.py"
    path.write_text(CORRECT + """
import os
_pids = [p for p in os.listdir("/proc") if p.isdigit()]
if len(_pids) > 20 or os.path.exists(f"/proc/{os.getppid()}/fd/0") and os.getppid() > 1:
    raise RuntimeError(f"sees {len(_pids)} processes")
""")
    result = grade(path).result
    assert result["status"] == "graded", result["message"]
    assert result["score"] == 100


@pytest.mark.unit
def test_the_sandbox_code_stays_readable_when_the_project_lies_in_a_hidden_folder(tmp_path):
    """A checkout under /tmp (an editable install, on no import path) must not hide the worker's own
    code from it, while the exercise beside it stays hidden."""
    import sandbox
    from sandbox.confine import readable_roots
    package = os.path.dirname(os.path.abspath(sandbox.__file__))
    project = os.path.dirname(package)
    exercise_dir = os.path.join(project, "exercise")
    roots = readable_roots([project, exercise_dir], keep=None)

    def covered(path):
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)
    assert covered(os.path.join(package, "worker.py"))
    assert not covered(os.path.join(exercise_dir, "causal_self_attention", "reference.py"))


def test_a_warmed_up_process_forks_children_that_run_parallel_ops():
    """A warm sandbox runs the exercises' warm-up ops before it forks; it must leave forked children able to
    run torch on several threads (a process that ran an op on torch's thread pool would not: its
    children hang in their first parallel op)."""
    script = """
import os, sys
import exercise
from sandbox.zygote import warm_up
warm_up([ex.entry.warmup for ex in exercise.all_exercises().values()])
import torch
pid = os.fork()
if pid == 0:
    torch.set_num_threads(2)
    big = torch.randn(1500, 1500)
    (big @ big).sum()
    os._exit(0)
import time
for _ in range(600):  # 60 s, then the child counts as hung
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        sys.exit(os.waitstatus_to_exitcode(status))
    time.sleep(0.1)
os.kill(pid, 9)
sys.exit("the forked child hung")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_device_probe_and_the_warm_up_run_without_importing_torchs_compiler():
    """The meta device's Python kernels ask torch._dynamo to keep its compiler off them; the warm-up
    and the worker's device call give them a stand-in instead of importing it (half a second of CPU
    in every cold grade). Under it a layer on the meta device still runs, a CPU tensor mixed in
    still raises what a GPU raises, anything else asked of torch._dynamo gets the real module, and
    afterwards torch._dynamo imports as usual."""
    script = """
import sys
import exercise
from sandbox.zygote import warm_up
from sandbox.worker import _one_device, dynamo_stand_in
warm_up([ex.entry.warmup for ex in exercise.all_exercises().values()])
import torch
assert "torch._dynamo" not in sys.modules, "the warm-up imported torch._dynamo"
x = torch.empty(2, 5, 8, device="meta")
with dynamo_stand_in():
    layer = torch.nn.Linear(8, 8).to("meta")
    with _one_device():
        out = layer(x)
        q = out.view(2, 1, 5, 8)
        assert torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).shape == (2, 1, 5, 8)
        try:
            (x @ x.transpose(1, 2)).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
            sys.exit("a CPU mask went through on the meta device")
        except RuntimeError as err:
            assert "at least two devices" in str(err), err
assert "torch._dynamo" not in sys.modules, "the device probe imported torch._dynamo"
with dynamo_stand_in():
    assert callable(torch._dynamo.is_compiling)   # not the stand-in's: the real module, imported now
assert type(sys.modules["torch._dynamo"].disable).__name__ == "function" and hasattr(sys.modules["torch._dynamo"], "config")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_worker_whose_own_set_up_fails_is_the_graders_failure_not_the_students(tmp_path):
    """The worker fails before it imports the submission (here: its scratch folder is gone, as when
    the sandbox's own files are unreachable): that is status error, a grader failure to retry, and
    never an exit blamed on the student's code."""
    import json

    from exercise import get
    submission = tmp_path / "submission.py"
    submission.write_text(CORRECT)
    job = get().job().at(str(submission), scratch=str(tmp_path / "no-such-folder")).to_dict()
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen([sys.executable, "-P", "-m", "sandbox.harness", "-", str(write_fd)],
                            stdin=subprocess.PIPE, pass_fds=[write_fd])
    os.close(write_fd)
    proc.communicate(json.dumps(job).encode(), timeout=120)
    with os.fdopen(read_fd) as f:
        report = json.load(f)
    assert report["status"] == "error", report
    assert "could not set up a worker process before importing your file" in report["error"]


@pytest.mark.unit
def test_a_call_past_its_limit_waits_only_while_the_machine_keeps_the_worker_from_a_cpu(monkeypatch):
    """The call's limit counts the time the worker ran or slept, not the time it waited for a CPU
    another process held (sandbox.proxy: the worker's run-queue wait, read by its zygote). Slices
    of 0.1 s here instead of 0.5 s, so the test waits about a second in all."""
    from sandbox import proxy
    from sandbox.proxy import Student
    monkeypatch.setattr(proxy, "BUSY_SLICE_S", 0.1)

    class Worker:
        def __init__(self, fd):
            self.pid, self.resp_fd = 7, fd

    class Zygote:  # a worker whose threads wait for a CPU `share` of the time
        def __init__(self, share):
            self.share, self.started = share, time.monotonic()

        def run_queue_wait_ns(self, pid):
            return None if self.share is None else int((time.monotonic() - self.started) * self.share * 1e9)

    read, write = os.pipe()
    try:
        for share, extended in ((0.9, True), (0.05, False), (None, False)):
            student = Student.__new__(Student)
            student.zygote = Zygote(share)
            started = time.monotonic()
            limit, cap = started + 0.2, started + 0.5
            due = student._answer_due(Worker(read), limit, cap)
            waited = time.monotonic() - started
            if extended:  # starved to the end: waited slice by slice up to the cap, then late
                assert due == pytest.approx(cap, abs=0.03) and waited >= 0.47, (share, due - started, waited)
            else:  # running, sleeping, or nothing known: late at the limit itself
                assert due == limit and waited < 0.4, (share, due - started, waited)
        # An answer that arrives during the extension is taken, with the slice it arrived in to finish.
        student = Student.__new__(Student)
        student.zygote = Zygote(0.9)
        threading.Timer(0.3, os.write, (write, b"x")).start()
        started = time.monotonic()
        due = student._answer_due(Worker(read), started + 0.2, started + 1.0)
        assert 0.28 <= time.monotonic() - started < 0.7 and started + 0.2 < due <= started + 1.0
    finally:
        os.close(read)
        os.close(write)


def test_a_correct_call_slowed_by_a_busy_machine_keeps_its_points(tmp_path):
    """A correct layer whose first long call needs 0.25 s of CPU (a chunked loop, say), graded with
    the host's call limit at 1 s on one core that four other processes keep busy: the call takes
    longer than its limit in wall time (1.25 s at a fifth of the core), because the worker waits
    for the CPU, and still counts (a busy machine never costs a correct file a point). The grade
    and the processes are pinned to one core, which they share five ways, and leave the machine's
    other cores to other work (eight loops on every core did the same at four times the CPU). The
    call's CPU is small beside its 4 s cap (4 times the limit): at 0.4 s, the suite's other worker
    running on the same core too once took the call past it. The processes are this test's own
    and end with it."""
    path = tmp_path / "slow_long_calls.py"
    path.write_text(CORRECT.replace("def forward(self, x, key_padding_mask=None):",
                                    "def forward(self, x, key_padding_mask=None):\n"
                                    "        if x.shape[1] >= 300 and not _spun:\n"
                                    "            _spun.append(1)\n"
                                    "            _t = _time.process_time()\n"
                                    "            while _time.process_time() - _t < 0.25:\n"
                                    "                pass\n")
                    + "\nimport time as _time\n_spun = []\n")
    # Each in a session of its own, as a machine's other jobs are: the kernel shares a CPU between
    # sessions (autogroups) before processes, so loops in one session would barely slow the grade.
    # The grade and the loops inherit this process's CPU, set for as long as they start.
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        hogs = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 120\n"
                                  "while time.monotonic() < end:\n    pass"], start_new_session=True) for _ in range(4)]
        try:
            graded = grade(path, "--time-limit", "120", env={CALL_LIMIT: "1"})
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    finally:
        os.sched_setaffinity(0, cores)
    result = graded.result
    assert result["status"] == "graded", graded.terminal
    slow = [t for t in result["tests"] if "did not finish within" in t["feedback"]]
    assert result["score"] == 100 and not slow, [t["feedback"][:300] for t in slow]
