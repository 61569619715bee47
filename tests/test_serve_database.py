"""`grade serve`'s database, through the real server process: a grade in flight when the service is
killed (kill -9) is graded after the restart and its callback sent; a platform catches up with
GET /v1/grades?since=, page by page; /healthz says whether the database answers; a database URL the
service cannot use is one line at start; two services share one PostgreSQL (a real server, started
here) and an operator upgrading from the folder of JSON files loses nothing."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from tests.support.grading import SUBMISSIONS
from tests.support.postgres import PostgresServer
from tests.support.queueing import ACCEPT_LOCAL, until
from tests.support.serving import CallbackReceiver, Server, bug_ids, two_tokens

CORRECT = (SUBMISSIONS / "correct" / "einsum.py").read_bytes()
SLOW = CORRECT + b"\nimport time as _time\n_time.sleep(4)  # each worker's import takes 4 s\n"


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    """The tokens file (in the module's folder, where the servers' logs go too) and two tokens."""
    return two_tokens(tmp_path_factory.mktemp("serve-db"))


@pytest.fixture(scope="module")
def folder(tokens):
    return tokens[0].parent


@pytest.fixture
def receiver():
    with CallbackReceiver() as r:
        yield r


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer()
    yield server
    server.stop()


def test_a_grade_in_flight_when_the_service_is_killed_is_graded_after_the_restart(folder, tokens, receiver):
    path, a = tokens[0], tokens[1]
    store = folder / "killed"
    url = receiver.url
    first = Server(folder, "--tokens", str(path), "--slots", "1", "--callback-allow", "127.0.0.1", "--store", str(store))
    try:
        answer = first.upload(a, SLOW, "slow.py", callback_url=url)
        assert answer.status_code == 202, answer.text
        until(lambda: first.client.get(answer.json()["url"], headers=a.headers).json()["state"] == "running", 60,
              "the grade to be under way in the slot")
    finally:
        first.kill()
    assert receiver.received == []
    second = Server(folder, "--tokens", str(path), "--slots", "1", "--callback-allow", "127.0.0.1", "--store", str(store))
    try:
        document = second.wait(a, answer.json()["url"])
        assert receiver.arrived.wait(60), "the callback never came after the restart"
    finally:
        second.stop()
    assert document["state"] == "done" and document["result"]["score"] == 100, document
    sent = json.loads(receiver.received[-1][1])
    assert sent["id"] == answer.json()["id"] and sent["result"] == document["result"]


def test_a_platform_catches_up_page_by_page(folder, tokens):
    path, a, b = tokens
    server = Server(folder, "--tokens", str(path), "--slots", "1")
    try:
        before = time.time() - 1
        ids = [server.grade(a, f"print({n})\n".encode(), f"p{n}.py")["id"] for n in range(3)]
        seen, cursor, pages = [], None, 0
        while True:
            answer = server.client.get("/v1/grades", headers=a.headers,
                                       params={"since": before, "limit": 2, **({"cursor": cursor} if cursor else {})})
            assert answer.status_code == 200, answer.text
            page = answer.json()
            pages += 1
            seen += [g["id"] for g in page["grades"]]
            assert all(g["state"] == "failed" or "result" in g for g in page["grades"])
            cursor = page["next"]
            if cursor is None:
                break
        assert seen == ids and pages == 2  # oldest change first, two and then one
        later = server.client.get("/v1/grades", headers=a.headers, params={"since": time.time() + 1}).json()
        assert later == {"grades": [], "next": None}
        assert server.client.get("/v1/grades", headers=b.headers, params={"since": before}).json()["grades"] == []
        bad = server.client.get("/v1/grades", headers=a.headers, params={"cursor": "not-a-cursor"})
        assert bad.status_code == 400 and "cursor" in bad.json()["detail"]
        assert server.client.get("/v1/grades", headers=a.headers, params={"limit": 1000}).status_code == 422
        health = server.client.get("/healthz").json()
        assert (health["status"], health["database"]) == ("ok", "ok"), health
    finally:
        server.stop()


@pytest.mark.parametrize("url,says", [
    ("nosuch://x", "not supported"),
    ("not a url", "not a database URL"),
    ("postgresql+psycopg://grader:wrong@127.0.0.1:1/postgres", "cannot open the database"),
])
def test_a_database_the_service_cannot_use_is_one_line_at_start(folder, url, says):
    proc = subprocess.run([sys.executable, "-m", "grader", "serve", *ACCEPT_LOCAL, "--database", url, "--port", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and says in errors[0] and "Traceback" not in proc.stderr, proc.stderr
    assert "wrong" not in proc.stderr  # the password is never printed


def test_two_services_share_one_postgresql(folder, tokens, postgres):
    path, a, _ = tokens
    one = Server(folder, "--tokens", str(path), "--slots", "1", "--database", postgres.url)
    two = Server(folder, "--tokens", str(path), "--slots", "1", "--database", postgres.url)
    try:
        data = (SUBMISSIONS / "buggy" / "mask_after_softmax__loop.py").read_bytes() + b"\n# shared\n"
        document = one.grade(a, data, "shared.py")
        assert bug_ids(document["result"]) == ["mask_after_softmax"]
        assert two.client.get(document["url"], headers=a.headers).json() == document  # read by the other
        again = two.upload(a, data, "shared.py")  # graded before, on the other service
        assert again.status_code == 200 and again.json()["result"] == document["result"]
        assert two.client.get("/healthz").json()["database"] == "ok"
    finally:
        one.stop()
        two.stop()
    # The database stopped under a running service: /healthz says so, with 503.
    alone = Server(folder, "--tokens", str(path), "--slots", "1", "--database", postgres.url)
    try:
        postgres._run(postgres.pg_ctl, "-D", postgres.data, "-m", "immediate", "-w", "stop")
        answer = alone.client.get("/healthz")
        assert answer.status_code == 503 and answer.json()["status"] == "unavailable", answer.text
        assert answer.json()["problems"][0].startswith("the database does not answer"), answer.text
    finally:
        alone.stop()
        postgres._run(postgres.pg_ctl, "-D", postgres.data, "-l", postgres.log, "-w", "-t", "60", "-o",
                      f"-p {postgres.port} -k {postgres.folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start")


def test_a_store_folder_of_json_files_is_taken_into_the_database(folder, tokens):
    """The folder an earlier version wrote (one JSON file per grade, result and request): its
    grades answer after the upgrade, and their results answer repeated uploads."""
    path, a, _ = tokens
    store = folder / "legacy"
    for sub in ("grades", "results", "requests"):
        (store / sub).mkdir(parents=True)
    result = {"status": "rejected", "score": 0.0, "max_score": 100.0, "message": "kept", "tests": [], "bugs": []}
    grade = {"id": "A" * 22, "owner": _token_id(path, "course-a"), "key": "k" * 64, "name": "old.py",
             "exercise": "causal-self-attention", "format": "native", "callback_url": None, "job": None,
             "state": "done", "result": result, "created": time.time() - 3600}
    (store / "grades" / f"{grade['id']}.json").write_text(json.dumps(grade))
    (store / "results" / f"{grade['key']}.json").write_text(json.dumps(result))
    server = Server(folder, "--tokens", str(path), "--slots", "1", "--store", str(store))
    try:
        document = server.client.get(f"/v1/grades/{grade['id']}", headers=a.headers).json()
        assert document["state"] == "done" and document["result"]["message"] == "kept", document
    finally:
        server.stop()
    assert not list((store / "grades").glob("*.json"))  # taken once: renamed, not taken again


def _token_id(path, name: str) -> str:
    return next(t["id"] for t in json.loads(path.read_text())["tokens"] if t["name"] == name)


def test_the_service_answers_while_the_database_is_sqlite_in_memory(folder, tokens):
    """Without --store or --database: an in-memory SQLite, and /healthz says it answers."""
    server = Server(folder, "--tokens", str(tokens[0]), "--slots", "1")
    try:
        health = httpx.get(f"{server.url}/healthz").json()
        assert (health["status"], health["database"]) == ("ok", "ok"), health
    finally:
        server.stop()
