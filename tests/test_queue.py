"""The queue: `grade worker` processes on a redis-server started on a free port of 127.0.0.1 (with
the project's deploy/redis.conf), `grade batch --queue` and the client API (grader.queue), on real
files in the real local sandbox. The tests that kill, stop or restart Redis or a worker, or need
workers of their own settings, start their own; the others share one redis-server and two warm
workers for the module (shared_redis, shared_workers), each test with a store that is empty to it."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.grading import EXAMPLES, SUBMISSIONS
from tests.support.queueing import ACCEPT_LOCAL, OWN_TMP, RedisServer, Workers, until

CORRECT = sorted((SUBMISSIONS / "correct").glob("*.py"))
BUGGY = sorted((SUBMISSIONS / "buggy").glob("*.py"))


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis")
    yield server
    server.kill()


@pytest.fixture
def workers(redis_server, tmp_path):
    pool = Workers(redis_server.url, tmp_path)
    yield pool
    pool.kill_all()


SHARED = ("a", "b")  # the shared pool's workers


@pytest.fixture(scope="module")
def _shared_stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shared-queue")
    server = RedisServer(folder / "redis")
    pool = Workers(server.url, folder)
    try:
        pool.start_all(*SHARED)
        yield server, pool
    finally:
        pool.kill_all()
        server.kill()


@pytest.fixture
def _shared(_shared_stack):
    """The module's redis-server and warm workers a and b, as a fresh stack is to the test: the
    tasks of the test before it are over (what was left queued is dropped), the grader's keys of
    grades (results, claims, deliveries, who runs what) are gone, and the workers' logs read from
    here on. Database 0 is the workers'; the others are free for a test's own use."""
    from grader import queue
    server, pool = _shared_stack
    r = server.client
    for lane in queue.LANES:  # Celery's lists of a lane (one per priority)
        for key in r.scan_iter(f"{lane}*"):
            r.delete(key)
    until(lambda: not r.hlen("unacked") and not any(r.scan_iter("grader:running:*")), 120,
          "the tasks of the test before to end")
    for kind in ("result", "queued", "deliveries", "running"):
        for key in r.scan_iter(f"grader:{kind}:*"):
            r.delete(key)
    pool.mark()
    return server, pool


@pytest.fixture
def shared_redis(_shared):
    return _shared[0]


@pytest.fixture
def shared_workers(_shared):
    return _shared[1]


def _env(**extra: str) -> dict:
    return {**os.environ, "COLUMNS": "120", "TMPDIR": str(OWN_TMP), **extra}


def batch(folder: Path, out: Path, *extra: str, env: dict | None = None, timeout: float = 600):
    return subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, env=env or _env())


def start_batch(folder: Path, out: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grader", "batch", str(folder), "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env or _env())


def gradebook(out: Path) -> dict[str, dict]:
    with open(out / "gradebook.csv", newline="") as f:
        return {row["submission"]: row for row in csv.DictReader(f)}


def results(out: Path) -> dict[str, dict]:
    """Each submission's result JSON in OUT, by its name in the batch folder."""
    index = json.loads((out / "index.json").read_text())["submissions"]
    return {key: json.loads((out / entry["result_file"]).read_text()) for key, entry in index.items()}


def comparable(result: dict) -> dict:
    """A result without what differs between two grades of the same file: the time it took (also in
    feedback's heading, which a long name wraps onto a second line, and in its phases)."""
    feedback = re.sub(r"^.*?\d+(?:\.\d+)?\s+s\n", "", result["feedback"], count=1, flags=re.S)  # the heading
    return {**result, "duration_s": None, "feedback": feedback, "phases": None}


def copy_class(folder: Path, files: list[Path]) -> Path:
    folder.mkdir()
    for path in files:
        shutil.copy(path, folder / path.name)
    return folder


def check_out_once(out: Path, names: list[str]) -> None:
    """Every submission has exactly one row, one index entry and one result file in OUT."""
    assert sorted(gradebook(out)) == sorted(names)
    assert sorted(results(out)) == sorted(names)
    assert len(list((out / "results").glob("*.json"))) == len(names)
    assert (out / "report.html").is_file()


def test_a_class_graded_by_two_workers_gets_what_a_local_batch_gives(tmp_path, shared_workers, shared_redis):
    """The class's correct and buggy files are the corpora's (tests.support.corpus), named as there:
    their local batch's results are the ones the run graded already; the rest is graded here.
    A class of 9 (3 correct files, 3 buggy ones of three kinds, the two malformed files and a folder
    without a submission) proves what the 42 of before did (both workers grade, one log line per
    grade, each result and gradebook row is the local batch's, the folder is rejected on this
    machine) with a fifth of the grades. Its buggy files are in the buggy corpus's first chunk: a
    run of this file alone grades that one chunk of it for the comparison, not five."""
    from tests.support.corpus import BUGGY_AND_UNKNOWN, CORRECT as CORRECT_CORPUS
    workers, redis_server = shared_workers, shared_redis
    kinds = [BUGGY[0], next(p for p in BUGGY if p.name.startswith("causal_mask_off_by_one")),
             next(p for p in BUGGY if p.name.startswith("fixed_max_length"))]   # the first chunk's three kinds
    corpus = {p.name: p for p in CORRECT[:3]} | {f"buggy__{p.name}": p for p in kinds}
    others = {p.name: p for p in (SUBMISSIONS / "malformed" / "syntax_error.py", SUBMISSIONS / "malformed" / "no_class.py")}
    folder, rest = tmp_path / "class", tmp_path / "rest"
    for target, files in ((folder, corpus | others), (rest, others)):
        target.mkdir()
        for name, path in files.items():
            shutil.copy(path, target / name)
        (target / "bob").mkdir()  # a student folder without a submission: rejected by the batch itself
        (target / "bob" / "notes.txt").write_text("I did not finish\n")
    local = batch(rest, tmp_path / "local", "--jobs", "2")
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    queued = batch(folder, tmp_path / "queued", "--queue", redis_server.url)
    assert queued.returncode == 0, queued.stdout[-3000:] + queued.stderr[-3000:]

    names = [*corpus, *others, "bob"]
    assert len(names) >= 9
    check_out_once(tmp_path / "queued", names)
    local_results = results(tmp_path / "local") | {
        name: CORRECT_CORPUS.result(name) if name in CORRECT_CORPUS.files else BUGGY_AND_UNKNOWN.result(name.replace("__", "/", 1))
        for name in corpus}
    # The gradebook's rows, where this test graded the local batch (the corpora's batches keep no
    # gradebook of this class; a row is written from the result, compared whole below).
    here, there = gradebook(tmp_path / "local"), gradebook(tmp_path / "queued")
    for name in here:
        assert ({k: here[name][k] for k in ("status", "score", "bugs")}
                == {k: there[name][k] for k in ("status", "score", "bugs")}), name
    queued_results = results(tmp_path / "queued")
    # bob's folder was rejected on this machine, before any sandbox: its result names the sandbox the
    # batch asked the workers for, none ("worker": each worker's own); all else is the local batch's.
    assert queued_results["bob"]["environment"]["sandbox"] == "worker"
    queued_results["bob"]["environment"]["sandbox"] = "local"
    for name in names:
        assert comparable(queued_results[name]) == comparable(local_results[name]), name
    assert {there[n]["status"] for n in names} == {"graded", "rejected"}
    # Both workers graded, and each logged one line per grade (bob's folder never left this machine).
    lines = workers.grade_lines("a", "b", count=len(corpus) + len(others))
    assert workers.grade_lines("a") and workers.grade_lines("b")
    assert len(lines) == len(corpus) + len(others)


def test_an_upload_is_graded_once_as_grade_file_grades_it(tmp_path, shared_workers, shared_redis, grade_cached):
    from grader import queue
    workers, redis_server = shared_workers, shared_redis
    path = EXAMPLES / "mask_after_softmax.py"
    data = path.read_bytes()
    gid = queue.submit(redis_server.url, data, path.name)
    assert queue.state(redis_server.url, gid) in ("queued", "running", "done")
    got = queue.result(redis_server.url, gid, timeout=300)
    assert queue.state(redis_server.url, gid) == "done"
    direct = grade_cached(path)
    assert direct.exit_code == 0
    assert comparable(got) == comparable(direct.result)
    assert [b["id"] for b in got["bugs"]] == ["mask_after_softmax"]

    # The same bytes, name, exercise, sandbox and limit again: the same id, answered from the store.
    assert queue.submit(redis_server.url, data, path.name) == gid
    assert queue.state(redis_server.url, gid) == "done"
    assert queue.result(redis_server.url, gid, timeout=5) == got
    other = queue.submit(redis_server.url, data, path.name, time_limit=60, lane="regrade")
    assert other != gid
    assert queue.result(redis_server.url, other, timeout=300)["score"] == got["score"]
    assert len(workers.grade_lines(*SHARED, count=2)) == 2  # one grade each; the repeat cost none

    with pytest.raises(KeyError):
        queue.state(redis_server.url, "0" * 64)
    # Nobody takes tasks from database 1 (no other test uses it): the wait ends with TimeoutError,
    # the task stays queued.
    idle = redis_server.url[:-1] + "1"
    waiting = queue.submit(idle, data, path.name)
    with pytest.raises(TimeoutError):
        queue.result(idle, waiting, timeout=1)
    assert queue.state(idle, waiting) == "queued"


def test_a_worker_killed_with_kill_9_has_its_task_regraded_within_the_stated_bound(tmp_path, workers, redis_server):
    from grader import queue
    files = CORRECT[:5]  # one for each worker to start on, and more for b after a is killed
    folder = copy_class(tmp_path / "class", files)
    workers.start_all("a", "b")  # the default lease (240 s): the reaper, not the lease, brings the task back
    proc = start_batch(folder, tmp_path / "out", "--queue", redis_server.url, "--time-limit", "15")
    try:
        def running_on(worker: bytes, only: str | None = None):
            for key in redis_server.client.scan_iter("grader:running:*"):
                if redis_server.client.get(key) == worker and (only is None or key.decode().endswith(only)):
                    return key.decode().rsplit(":", 1)[1]
            return None
        gid = until(lambda: running_on(b"a@test"), 240, "worker a to be in a grade", every=0.02)
        workers.kill("a")  # SIGKILL to its whole process group: the Celery parent and its pool
        killed = time.monotonic()
        until(lambda: "reaper: put a task of a@test back" in workers.log("b"), 120, "b's reaper to put it back",
              every=0.05)
        restored = time.monotonic() - killed
        until(lambda: running_on(b"b@test", gid), 240, "worker b to take the task", every=0.05)
        taken = time.monotonic() - killed
        output, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    # The measurement, for the README (no timed assertion: the machine is shared).
    print(f"\nkill -9 of worker a's process group: its task was put back on the queue after {restored:.1f} s "
          f"and taken by worker b after {taken:.1f} s (stated bound: {queue.ALIVE_S + queue.SWEEP_S:g} s to put "
          f"it back; lease {queue.lease_s():g} s, not waited for)")
    assert proc.returncode == 0, output[-3000:]
    names = [p.name for p in files]
    check_out_once(tmp_path / "out", names)
    assert all(row["status"] == "graded" and row["score"] == "100" for row in gradebook(tmp_path / "out").values())
    assert not any(gid[:12] in line for line in workers.grade_lines("a"))
    redone = [line for line in workers.grade_lines("b") if gid[:12] in line]
    assert len(redone) == 1 and "attempt=2" in redone[0], redone


def test_a_redis_restart_mid_batch_loses_nothing(tmp_path, workers, redis_server):
    files = CORRECT[8:16]  # three recorded before Redis goes, five queued or in flight through it
    folder = copy_class(tmp_path / "class", files)
    workers.start_all("a", "b")
    proc = start_batch(folder, tmp_path / "out", "--queue", redis_server.url, "--time-limit", "25")
    try:
        def recorded() -> int:
            try:
                return len(json.loads((tmp_path / "out" / "index.json").read_text())["submissions"])
            except (OSError, ValueError):
                return 0
        until(lambda: recorded() >= 3, 240, "three results")
        assert recorded() < len(files)  # what is left is in Redis only, queued or in flight
        redis_server.stop()
        # Back only once both workers lost their connection to it: each rides out the outage.
        until(lambda: all("Connection to broker lost" in workers.log(name) for name in ("a", "b")), 60,
              "both workers to lose their connection to Redis", every=0.05)
        redis_server.start()
        output, _ = proc.communicate(timeout=400)
    finally:
        proc.kill()
    assert proc.returncode == 0, output[-3000:]
    check_out_once(tmp_path / "out", [p.name for p in files])
    assert all(row["status"] == "graded" and row["score"] == "100" for row in gradebook(tmp_path / "out").values())


def test_ctrl_c_keeps_what_was_recorded_and_a_rerun_collects_the_rest(tmp_path, shared_workers, shared_redis):
    workers, redis_server = shared_workers, shared_redis
    files = CORRECT[24:30]
    folder = copy_class(tmp_path / "class", files)
    proc = start_batch(folder, tmp_path / "out", "--queue", redis_server.url)
    try:
        until(lambda: (tmp_path / "out" / "index.json").is_file(), 240, "a first result")
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, output[-3000:]
    kept = len(results(tmp_path / "out"))
    assert 1 <= kept < len(files)
    rerun = batch(folder, tmp_path / "out", "--queue", redis_server.url)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert f"{kept} submission(s) already graded under the same key: kept" in rerun.stdout
    check_out_once(tmp_path / "out", [p.name for p in files])
    # What was sent before Ctrl-C was graded by the worker meanwhile, once: the rerun only collected it.
    assert len(workers.grade_lines(*SHARED, count=len(files))) == len(files)


def test_a_poison_task_ends_as_an_error_after_its_retries(tmp_path, workers, redis_server):
    from grader import queue
    folder = copy_class(tmp_path / "class", CORRECT[20:21])  # the rest of the class is still graded
    poison = CORRECT[23].read_bytes() + b"\n# the worker that takes this file dies (a test-only hook)\n"
    (folder / "poison.py").write_bytes(poison)
    worker = workers.start("a", env={queue.POISON_ENV: hashlib.sha256(poison).hexdigest()})
    run = batch(folder, tmp_path / "out", "--queue", redis_server.url)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]  # a row is an error: rerun it
    rows = gradebook(tmp_path / "out")
    assert rows["poison.py"]["status"] == "error" and rows["poison.py"]["score"] == ""
    poisoned = results(tmp_path / "out")["poison.py"]
    assert poisoned["score"] is None
    assert f"died during each of its {1 + queue.RETRIES} attempts" in poisoned["message"]
    assert all(rows[p.name]["status"] == "graded" and rows[p.name]["score"] == "100" for p in CORRECT[20:21])
    # Its worker process died once per attempt, no more; the worker itself lives on.
    assert workers.log("a").count("exited with 'exitcode 70'") == 1 + queue.RETRIES
    assert worker.poll() is None


def test_an_interactive_upload_goes_before_200_regrades(tmp_path, workers, redis_server):
    from grader import queue
    url = redis_server.url
    workers.start("a")
    # Cheap regrade tasks: files Python cannot decode, rejected before any sandbox starts.
    regrades = [queue.submit(url, b"\xff # %d" % i, f"r{i}.py", lane="regrade") for i in range(200)]

    def done(ids) -> int:
        return sum(queue.state(url, i) in ("done", "failed") for i in ids)
    until(lambda: done(regrades[:5]) > 0, 120, "the regrade to start")
    correct = EXAMPLES / "correct.py"
    upload = queue.submit(url, correct.read_bytes(), correct.name)
    # More uploads behind it: a worker takes every interactive task before the next regrade one.
    uploads = [queue.submit(url, b"\xfe # upload %d" % i, f"u{i}.py") for i in range(20)]
    assert queue.result(url, upload, timeout=300)["score"] == 100
    until(lambda: done(uploads) == len(uploads), 300, "the uploads", every=0.02)
    assert done(regrades) <= 100
    # The worker's log, one line per grade in the order its one slot graded them (not this test's
    # polling, which a busy machine slows): between the first and the last interactive grade, at
    # most the regrade tasks prefetched when the uploads came; taking the lanes in turn would
    # put 20 there.
    lines = workers.grade_lines("a")
    interactive = [i for i, line in enumerate(lines) if re.search(r" (correct|u\d+)\.py ", line)]
    assert len(interactive) == 1 + len(uploads), lines[-40:]
    between = [line for line in lines[interactive[0]:interactive[-1]] if re.search(r" r\d+\.py ", line)]
    assert len(between) <= 2, between


def test_a_batch_without_a_queue_needs_no_celery(tmp_path):
    folder = copy_class(tmp_path / "class", [SUBMISSIONS / "malformed" / "syntax_error.py"])
    script = ("import runpy, sys\n"
              f"sys.argv = ['grade', 'batch', {str(folder)!r}, '--out', {str(tmp_path / 'out')!r}]\n"
              "try:\n    runpy.run_module('grader', run_name='__main__')\n"
              "except SystemExit as end:\n    code = end.code\n"
              "print('exit', code, 'celery loaded:', 'celery' in sys.modules, 'redis loaded:', 'redis' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=_env())
    assert "exit 0 celery loaded: False redis loaded: False" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert gradebook(tmp_path / "out")["syntax_error.py"]["status"] == "rejected"


def test_a_result_forged_in_redis_is_an_error_row_never_a_score(tmp_path, shared_workers, shared_redis):
    from grader import queue
    workers, redis_server = shared_workers, shared_redis
    r = redis_server.client
    # A real, signed result of a correct file (100 points), for the attacker to copy.
    donor = copy_class(tmp_path / "donor", [CORRECT[0]])
    run = batch(donor, tmp_path / "donor-out", "--queue", redis_server.url)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    donor_id = queue.grade_id(CORRECT[0].read_bytes(), CORRECT[0].name)
    signed = json.loads(r.get(f"grader:result:{donor_id}"))
    assert signed["result"]["score"] == 100 and set(signed) == {"id", "sha256", "sandbox", "result", "sig"}

    # Two buggy files; before their batch, someone who can write to Redis (no secret) sets their
    # result keys, computed from the files: one a 100 with the donor's signature and altered fields,
    # the other the donor's whole signed result, replayed under another key.
    buggy = [p for p in BUGGY if "mask" in p.name][:2]
    folder = copy_class(tmp_path / "class", buggy)
    altered, replayed = (queue.grade_id(p.read_bytes(), p.name) for p in buggy)
    forged = {**signed, "id": altered, "sha256": hashlib.sha256(buggy[0].read_bytes()).hexdigest(),
              "result": {**signed["result"], "submission": {"name": buggy[0].name,
                                                            "sha256": hashlib.sha256(buggy[0].read_bytes()).hexdigest()}}}
    r.set(f"grader:result:{altered}", json.dumps(forged))
    r.set(f"grader:result:{replayed}", json.dumps(signed))
    run = batch(folder, tmp_path / "out", "--queue", redis_server.url)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]  # error rows: rerun them
    rows, got = gradebook(tmp_path / "out"), results(tmp_path / "out")
    for path in buggy:
        assert rows[path.name]["status"] == "error" and rows[path.name]["score"] == "", rows[path.name]
        assert got[path.name]["score"] is None
        assert "signature did not verify" in got[path.name]["message"], got[path.name]["message"]
    assert not any(p.name in line for line in workers.grade_lines(*SHARED) for p in buggy)  # nothing was graded
    # The forged keys were dropped: the rerun grades both files for real (and neither is a 100).
    assert r.get(f"grader:result:{altered}") is None and r.get(f"grader:result:{replayed}") is None
    rerun = batch(folder, tmp_path / "out", "--queue", redis_server.url)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    rows = gradebook(tmp_path / "out")
    assert all(rows[p.name]["status"] == "graded" and rows[p.name]["score"] not in ("", "100") for p in buggy), rows
    # A client of the API is told the same: a forged result is an error, never a score.
    r.set(f"grader:result:{altered}", json.dumps(forged))
    assert queue.state(redis_server.url, altered) == "failed"
    with pytest.raises(queue.signing.BadSignature, match="signature did not verify"):
        queue.result(redis_server.url, altered, timeout=5)


def test_an_injected_or_altered_task_is_refused_and_grades_nothing(tmp_path, shared_workers, shared_redis):
    import base64

    from grader import queue, signing
    workers, redis_server = shared_workers, shared_redis
    app = queue.app_for(redis_server.url)
    correct = (EXAMPLES / "correct.py").read_bytes()
    buggy = (EXAMPLES / "mask_after_softmax.py").read_bytes()

    def send(payload: dict) -> None:  # what a writer to Redis can put on a lane: any task body
        app.send_task(queue.TASK, args=[payload], queue="interactive", routing_key="interactive")

    # 1. A task signed with a secret that is not the queue's.
    injected = queue.grade_id(correct, "injected.py")
    payload = {"id": injected, "data": base64.b64encode(correct).decode(), "name": "injected.py",
               "exercise": "causal-self-attention", "sandbox": None, "time_limit": None, "lane": "interactive"}
    send({**payload, "sig": signing.sign(b"x" * 32, "task", queue._task_fields(payload, correct))})
    # 2. A real client's task for the buggy file, its bytes swapped for a correct file's on the way.
    real = queue.submit(redis_server.url, buggy, "student.py")
    # (the genuine task is graded; a copy of it with other bytes is sent as well)
    genuine = dict(payload, id=real, name="student.py", data=base64.b64encode(buggy).decode())
    genuine["sig"] = signing.sign(signing.load_secret(), "task", queue._task_fields(genuine, buggy))
    swapped_id = queue.grade_id(buggy, "swapped.py")
    swapped = {**genuine, "id": swapped_id, "data": base64.b64encode(correct).decode()}
    send(swapped)
    # 3. A task without a signature, and one that is not a task at all.
    unsigned = queue.grade_id(correct, "unsigned.py")
    send({**payload, "id": unsigned, "name": "unsigned.py"})
    send(["not", "a", "task"])

    for gid in (injected, swapped_id, unsigned):  # never submitted: no client waits, the key is watched
        until(lambda gid=gid: redis_server.client.exists(f"grader:result:{gid}"), 300, "the refusal to be stored")
        result = queue.result(redis_server.url, gid, timeout=5)
        assert result["status"] == "error" and result["score"] is None, result
        assert "refused by the worker: the task's signature did not verify" in result["message"], result["message"]
    assert queue.result(redis_server.url, real, timeout=300)["bugs"][0]["id"] == "mask_after_softmax"
    refused = lambda: sum(workers.log(name).count("refused: a task") for name in SHARED)  # noqa: E731
    until(lambda: refused() >= 4, 60, "the workers to refuse the four tasks")
    assert refused() == 4
    # Only the genuine task reached a sandbox.
    assert len(workers.grade_lines(*SHARED, count=1)) == 1 and "student.py" in workers.grade_lines(*SHARED)[0]


def test_a_worker_or_queued_batch_without_a_secret_or_with_a_short_lease_does_not_start(tmp_path, shared_redis):
    import redis

    url = shared_redis.url[:-1] + "2"  # a database of this test's own on the shared server: empty
    env = {k: v for k, v in _env().items() if not k.startswith("GRADER_QUEUE_SECRET")}
    worker = subprocess.run([sys.executable, "-m", "grader", "worker", "--broker", url, *ACCEPT_LOCAL], env=env,
                            capture_output=True, text=True, timeout=120)
    assert worker.returncode == 1 and "the queue needs a secret" in worker.stderr, worker.stderr
    assert len(worker.stderr.strip().splitlines()) == 1, worker.stderr
    folder = copy_class(tmp_path / "class", [CORRECT[0]])
    queued = batch(folder, tmp_path / "out", "--queue", url, env=env)
    assert queued.returncode == 1 and "the queue needs a secret" in queued.stderr, queued.stderr
    assert not (tmp_path / "out").exists()
    short = (tmp_path / "short.secret")
    short.write_text("too short\n")
    worker = subprocess.run([sys.executable, "-m", "grader", "worker", "--broker", url, *ACCEPT_LOCAL,
                             "--secret-file", str(short)], env=env, capture_output=True, text=True, timeout=120)
    assert worker.returncode == 1 and "needs at least 32" in worker.stderr, worker.stderr
    # A lease that a grade of the longest time limit would outlive: redelivered while it runs.
    worker = subprocess.run([sys.executable, "-m", "grader", "worker", "--broker", url, *ACCEPT_LOCAL],
                            env=_env(GRADER_VISIBILITY_TIMEOUT="30"), capture_output=True, text=True, timeout=120)
    assert worker.returncode == 1, worker.stderr
    assert "a time limit of 90 s needs a lease (GRADER_VISIBILITY_TIMEOUT) of at least twice that; it is 30 s" \
        in worker.stderr and len(worker.stderr.strip().splitlines()) == 1, worker.stderr
    assert redis.Redis.from_url(url).dbsize() == 0  # none of them sent or took anything


@pytest.mark.docker
def test_a_docker_worker_refuses_a_local_task_and_no_warm_container_outlives_it(tmp_path, workers, redis_server):
    import docker

    from grader import queue
    client = docker.from_env()
    image = os.environ.get("GRADER_IMAGE", "attention-grader:latest")
    owner = f"queue-test-{os.getpid()}-{os.urandom(4).hex()}"  # this test's containers, and only them
    ours = {"label": [f"attention-grader.owner={owner}", "attention-grader=warm"]}
    # A warm container that an earlier run of worker a left behind (its process is long gone).
    leftover = client.containers.run(image, entrypoint=["sleep", "infinity"], detach=True, network_mode="none",
                                     labels={"attention-grader": "warm", "attention-grader.owner": owner,
                                             "attention-grader.worker": "a@test",
                                             "attention-grader.instance": "a@test#1-earlier",
                                             "attention-grader.queue": queue.queue_id(redis_server.url)})
    try:
        workers.start("a", "--sandbox", "docker", env={"GRADER_OWNER": owner, "GRADER_IMAGE": image})
        assert leftover.id not in {c.id for c in client.containers.list(all=True, filters=ours)}
        assert "removed warm container" in workers.log("a")
        warm = until(lambda: client.containers.list(filters=ours), 300, "worker a's warm container")
        assert all(c.labels["attention-grader.worker"] == "a@test" for c in warm)

        path = EXAMPLES / "mask_after_softmax.py"
        refused = queue.result(redis_server.url, queue.submit(redis_server.url, path.read_bytes(), path.name,
                                                              sandbox="local"), timeout=300)
        assert refused["status"] == "error" and refused["score"] is None
        assert "refused: this worker grades in the docker sandbox its operator started it with, and the task " \
               "asked for the local sandbox" in refused["message"], refused["message"]
        # Without a request (what `grade batch --queue` sends without --sandbox): the worker's own sandbox.
        graded = queue.result(redis_server.url, queue.submit(redis_server.url, path.read_bytes(), path.name),
                              timeout=600)
        assert graded["status"] == "graded" and [b["id"] for b in graded["bugs"]] == ["mask_after_softmax"]
        assert graded["environment"]["sandbox"] == "docker"
        assert len(workers.grade_lines("a", count=2)) == 2

        workers.kill("a")  # kill -9 of its process group: its warm containers go with it
        until(lambda: not _listed(client, ours), 120, "worker a's warm containers to go")
    finally:
        for container in client.containers.list(all=True, filters={"label": f"attention-grader.owner={owner}"}):
            container.remove(force=True)


def _listed(client, filters: dict) -> list:
    """The containers that match, as the SDK lists them: it inspects each one it listed, and one
    that is removed meanwhile (as a killed worker's containers are) is a 404 for the whole list."""
    import docker
    for _ in range(10):
        try:
            return client.containers.list(all=True, filters=filters)
        except docker.errors.NotFound:
            continue
    return client.containers.list(all=True, filters=filters)


def test_workers_and_clients_reach_a_tls_only_redis(tmp_path):
    import redis

    from grader import queue
    server = RedisServer(tmp_path / "redis", tls=True)
    pool = Workers(server.url, tmp_path)
    try:
        # The plain protocol gets nowhere on the TLS port.
        with pytest.raises(redis.ConnectionError):
            redis.Redis(port=server.port, password=server.password, socket_timeout=5).ping()
        pool.start("a")
        path = EXAMPLES / "mask_after_softmax.py"
        got = queue.result(server.url, queue.submit(server.url, path.read_bytes(), path.name), timeout=300)
        assert [b["id"] for b in got["bugs"]] == ["mask_after_softmax"]
        folder = copy_class(tmp_path / "class", [CORRECT[0]])
        run = batch(folder, tmp_path / "out", "--queue", server.url)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert gradebook(tmp_path / "out")[CORRECT[0].name]["score"] == "100"
        assert len(pool.grade_lines("a", count=2)) == 2
    finally:
        pool.kill_all()
        server.kill()


def test_a_worker_refuses_a_time_limit_its_lease_cannot_carry(shared_workers, shared_redis, monkeypatch):
    from grader import queue
    workers, redis_server = shared_workers, shared_redis  # the default lease: 240 s, enough for a limit of 120 s at most
    monkeypatch.setenv(queue.LEASE_ENV, "1000")  # a client that believes in a longer lease
    path = EXAMPLES / "correct.py"
    got = queue.result(redis_server.url, queue.submit(redis_server.url, path.read_bytes(), path.name, time_limit=200),
                       timeout=300)
    assert got["status"] == "error" and got["score"] is None
    assert "refused by this worker: a time limit of 200 s needs a lease (GRADER_VISIBILITY_TIMEOUT) of at least " \
           "twice that; it is 240 s" in got["message"], got["message"]
    lines = workers.grade_lines(*SHARED, count=1)
    assert len(lines) == 1 and "grade: error correct.py score=-" in lines[0], lines  # no sandbox ran it
