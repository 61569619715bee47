"""The queue: `grade worker` processes on a redis-server that each test starts on a free port of
127.0.0.1 (with the project's deploy/redis.conf), `grade batch --queue` and the client API
(grader.queue), on real files in the real local sandbox."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, SUBMISSIONS, grade
from tests.queueing import OWN_TMP, RedisServer, Workers, until

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
    the first line of the feedback)."""
    feedback = result["feedback"].split("\n", 1)
    return {**result, "duration_s": None, "feedback": feedback[1] if len(feedback) > 1 else ""}


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


def test_a_class_graded_by_two_workers_gets_what_a_local_batch_gives(tmp_path, workers, redis_server):
    files = CORRECT[:14] + BUGGY[::4][:26] + [SUBMISSIONS / "malformed" / "syntax_error.py",
                                              SUBMISSIONS / "malformed" / "no_class.py"]
    folder = copy_class(tmp_path / "class", files)
    (folder / "bob").mkdir()  # a student folder without a submission: rejected by the batch itself
    (folder / "bob" / "notes.txt").write_text("I did not finish\n")
    local = batch(folder, tmp_path / "local", "--jobs", "2")
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    workers.start("a")
    workers.start("b")
    queued = batch(folder, tmp_path / "queued", "--queue", redis_server.url)
    assert queued.returncode == 0, queued.stdout[-3000:] + queued.stderr[-3000:]

    names = [p.name for p in files] + ["bob"]
    assert len(names) >= 40
    check_out_once(tmp_path / "queued", names)
    here, there = gradebook(tmp_path / "local"), gradebook(tmp_path / "queued")
    for name in names:
        assert ({k: here[name][k] for k in ("status", "score", "bugs")}
                == {k: there[name][k] for k in ("status", "score", "bugs")}), name
    local_results, queued_results = results(tmp_path / "local"), results(tmp_path / "queued")
    for name in names:
        assert comparable(queued_results[name]) == comparable(local_results[name]), name
    assert {here[n]["status"] for n in names} == {"graded", "rejected"}
    # Both workers graded, and each logged one line per grade (bob's folder never left this machine).
    lines = workers.grade_lines("a") + workers.grade_lines("b")
    assert workers.grade_lines("a") and workers.grade_lines("b")
    assert len(lines) == len(files)


def test_an_upload_is_graded_once_as_grade_file_grades_it(tmp_path, workers, redis_server):
    from grader import queue
    workers.start("a")
    path = EXAMPLES / "mask_after_softmax.py"
    data = path.read_bytes()
    gid = queue.submit(redis_server.url, data, path.name)
    assert queue.state(redis_server.url, gid) in ("queued", "running", "done")
    got = queue.result(redis_server.url, gid, timeout=300)
    assert queue.state(redis_server.url, gid) == "done"
    direct = grade(path)
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
    assert len(workers.grade_lines("a")) == 2  # one grade each; the repeat cost none

    with pytest.raises(KeyError):
        queue.state(redis_server.url, "0" * 64)
    # Nobody takes tasks from database 1: the wait ends with TimeoutError, the task stays queued.
    idle = redis_server.url[:-1] + "1"
    waiting = queue.submit(idle, data, path.name)
    with pytest.raises(TimeoutError):
        queue.result(idle, waiting, timeout=1)
    assert queue.state(idle, waiting) == "queued"


def test_a_worker_killed_mid_grade_loses_nothing(tmp_path, workers, redis_server):
    lease = {"GRADER_VISIBILITY_TIMEOUT": "30"}  # the dead worker's task comes back after 30 s
    files = CORRECT[:8]
    folder = copy_class(tmp_path / "class", files)
    workers.start("a", env=lease)
    workers.start("b", env=lease)
    proc = start_batch(folder, tmp_path / "out", "--queue", redis_server.url, "--time-limit", "15", env=_env(**lease))
    try:
        def running_on_a():
            for key in redis_server.client.scan_iter("grader:running:*"):
                if redis_server.client.get(key) == b"a@test":
                    return key.decode().rsplit(":", 1)[1]
            return None
        gid = until(running_on_a, 240, "worker a to be in a grade", every=0.02)
        workers.kill("a")
        output, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, output[-3000:]
    names = [p.name for p in files]
    check_out_once(tmp_path / "out", names)
    assert all(row["status"] == "graded" and row["score"] == "100" for row in gradebook(tmp_path / "out").values())
    assert not any(gid[:12] in line for line in workers.grade_lines("a"))
    redone = [line for line in workers.grade_lines("b") if gid[:12] in line]
    assert len(redone) == 1 and "attempt=2" in redone[0], redone


def test_a_redis_restart_mid_batch_loses_nothing(tmp_path, workers, redis_server):
    files = CORRECT[8:20]
    folder = copy_class(tmp_path / "class", files)
    lease = {"GRADER_VISIBILITY_TIMEOUT": "60"}
    workers.start("a", env=lease)
    workers.start("b", env=lease)
    proc = start_batch(folder, tmp_path / "out", "--queue", redis_server.url, "--time-limit", "25", env=_env(**lease))
    try:
        def recorded() -> int:
            try:
                return len(json.loads((tmp_path / "out" / "index.json").read_text())["submissions"])
            except (OSError, ValueError):
                return 0
        until(lambda: recorded() >= 3, 240, "three results")
        assert recorded() < len(files)  # what is left is in Redis only, queued or in flight
        redis_server.stop()
        time.sleep(2)
        redis_server.start()
        output, _ = proc.communicate(timeout=400)
    finally:
        proc.kill()
    assert proc.returncode == 0, output[-3000:]
    check_out_once(tmp_path / "out", [p.name for p in files])
    assert all(row["status"] == "graded" and row["score"] == "100" for row in gradebook(tmp_path / "out").values())


def test_ctrl_c_keeps_what_was_recorded_and_a_rerun_collects_the_rest(tmp_path, workers, redis_server):
    files = CORRECT[24:30]
    folder = copy_class(tmp_path / "class", files)
    workers.start("a")
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
    assert len(workers.grade_lines("a")) == len(files)


def test_a_poison_task_ends_as_an_error_after_its_retries(tmp_path, workers, redis_server):
    from grader import queue
    folder = copy_class(tmp_path / "class", CORRECT[20:23])
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
    assert all(rows[p.name]["status"] == "graded" and rows[p.name]["score"] == "100" for p in CORRECT[20:23])
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
    before = done(regrades)
    assert queue.result(url, upload, timeout=300)["score"] == 100
    until(lambda: done(uploads) == len(uploads), 300, "the uploads", every=0.02)
    during = done(regrades) - before
    # At most the regrade task in flight and the one prefetched when the uploads came, and a
    # few that ended while this test looked; taking the lanes in turn would give 20 or more.
    assert during <= 8, during
    assert done(regrades) <= 100


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
