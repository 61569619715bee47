"""The HTTP contract of `grade serve`, in this process: the very application the server runs
(grader.service.app.create_app), driven through starlette's TestClient, with a stand-in engine that
makes each upload's result at once instead of grading it. Status codes, token scopes, paging,
re-uploads, regrade requests, size and rate limits, refusals and the page's escaping are the app's
own, whatever grades behind it; what only a real grade or a real server shows (the same result as
`grade batch`, bytes cut off on a socket, callbacks, restarts, the queue) is tests/test_serve*.py's.
"""
from __future__ import annotations

import hashlib
import secrets
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

with warnings.catch_warnings():
    # starlette's TestClient would rather drive the app with httpx2 than with httpx; the project
    # has httpx (its callbacks' client) and needs nothing of httpx2's.
    warnings.simplefilter("ignore", UserWarning)  # StarletteDeprecationWarning is one
    from starlette.testclient import TestClient

from grader import render
from grader.service import app as service_app
from grader.service import tokens as token_file
from grader.service.engines import EngineBusy
from grader.service.store import MAX_PAGE
from tests.support.records import result_with_hidden_test

pytestmark = pytest.mark.unit


class StandIn:
    """An engine that grades nothing: a result is made from the upload's name and bytes when it is
    asked for (40 of 100 points, one named bug). `problem` (why grading cannot happen) and `busy`
    (refuse every upload) are a test's to set; `submitted` counts what reached it."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[bytes, str, str]] = {}
        self.submitted: list[str] = []
        self.problem: str | None = None
        self.busy = False

    def submit(self, data: bytes, name: str, *, exercise: str, time_limit: float | None = None) -> str:
        if self.busy:
            raise EngineBusy.unavailable("the stand-in takes nothing")
        job = secrets.token_hex(8)
        self.jobs[job] = (data, name, exercise)
        self.submitted.append(name)
        return job

    def state(self, job: str) -> str:
        if job not in self.jobs:
            raise KeyError(job)
        return "done"

    def result(self, job: str, *, timeout: float | None = None) -> dict:
        data, name, exercise = self.jobs.pop(job)
        made = replace(result_with_hidden_test(), exercise=exercise, submission_name=name,
                       submission_sha256=hashlib.sha256(data).hexdigest())
        return replace(made, feedback=render.plain_text(made)).to_dict()

    def health(self) -> tuple[dict, str | None]:
        return {"sandbox": "stand-in", "slots": 2}, self.problem

    def slots(self) -> int:
        return 2

    def close(self) -> None:
        pass


class Api:
    """The app on a stand-in engine, with two platforms' tokens (course-a's, course-b's)."""

    def __init__(self, folder: Path, **settings) -> None:
        self.tokens_file = folder / "tokens.json"
        self.a, _ = token_file.new(self.tokens_file, "course-a")
        self.b, _ = token_file.new(self.tokens_file, "course-b")
        self.engine = StandIn()
        app = service_app.create_app(service_app.Settings(
            engine=self.engine, tokens=token_file.Tokens.load(self.tokens_file), store_dir=folder / "store", **settings))
        self.client = TestClient(app, raise_server_exceptions=False)

    @staticmethod
    def auth(token: str) -> dict:
        return {"Authorization": f"Bearer {token}"}

    def upload(self, token: str, data: bytes, name: str = "attention.py", **form):
        return self.client.post("/v1/grades", headers=self.auth(token), files={"file": (name, data)}, data=form)

    def finished(self, token: str, url: str, within_s: float = 10.0) -> dict:
        """GET the grade until it is finished (the stand-in answers at once; the app records it in a
        task of its own)."""
        deadline = time.monotonic() + within_s
        while True:
            document = self.client.get(url, headers=self.auth(token)).json()
            if document["state"] in ("done", "failed") or time.monotonic() > deadline:
                return document
            time.sleep(0.01)


@pytest.fixture
def api(tmp_path):
    made = Api(tmp_path)
    with made.client:   # runs the app's start and close, as the server does
        yield made


def test_an_upload_is_202_then_done_with_its_result_and_a_reupload_is_200_from_the_store(api):
    answer = api.upload(api.a, b"print('mine')\n", "mine.py")
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    assert accepted == {"id": accepted["id"], "state": "queued", "url": f"/v1/grades/{accepted['id']}"}
    document = api.finished(api.a, accepted["url"])
    assert set(document) == {"id", "state", "url", "result"} and document["state"] == "done"
    assert document["result"]["score"] == 40 and document["result"]["submission"] == {
        "name": "mine.py", "sha256": hashlib.sha256(b"print('mine')\n").hexdigest()}
    again = api.upload(api.a, b"print('mine')\n", "mine.py")
    assert again.status_code == 200 and again.json()["result"] == document["result"]
    assert again.json()["id"] != accepted["id"]
    assert api.engine.submitted == ["mine.py"]   # answered from the store: graded once


def test_the_platform_formats_are_the_native_result_converted(api):
    native = api.finished(api.a, api.upload(api.a, b"x = 1\n", "f.py").json()["url"])["result"]
    gradescope = api.finished(api.a, api.upload(api.a, b"x = 2\n", "f.py", format="gradescope").json()["url"])["result"]
    assert gradescope["score"] == native["score"] and len(gradescope["tests"]) == len(native["tests"])
    prairielearn = api.finished(api.a, api.upload(api.a, b"x = 3\n", "f.py", format="prairielearn").json()["url"])
    assert prairielearn["result"]["score"] == pytest.approx(native["score"] / native["max_score"])
    assert api.upload(api.a, b"x = 4\n", "f.py", format="csv").status_code == 400


def test_uploads_the_grader_does_not_take_are_400_with_the_reason_and_reach_no_engine(api):
    refused = api.upload(api.a, b"print(1)\n", "notes.txt")
    assert refused.status_code == 400 and ".py or .ipynb" in refused.json()["detail"]
    refused = api.upload(api.a, b"print(1)\n", "x.py", exercise="no-such-exercise")
    assert refused.status_code == 400 and "causal-self-attention" in refused.json()["detail"]
    for url in ("file:///etc/passwd", "gopher://x/", "not a url"):
        assert api.upload(api.a, b"print(1)\n", "x.py", callback_url=url).status_code == 400, url
    assert api.client.post("/v1/grades", headers=api.auth(api.a)).status_code == 422  # no file at all
    assert api.engine.submitted == []


def test_no_token_a_wrong_one_or_another_scheme_is_401_with_its_challenge(api):
    files = {"file": ("x.py", b"x = 1\n")}
    token_id = api.a.partition(".")[0]
    for wrong in (None, "nonsense", f"{token_id}.not-the-secret", api.a + "x", api.a[:-1], "gt_00000000.x"):
        headers = {} if wrong is None else api.auth(wrong)
        for answer in (api.client.post("/v1/grades", files=files, headers=headers),
                       api.client.get("/v1/grades/x", headers=headers), api.client.get("/v1/grades", headers=headers)):
            assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer", wrong
    assert api.client.get("/v1/grades/x", headers={"Authorization": f"Basic {api.a}"}).status_code == 401
    assert api.engine.submitted == []


def test_a_token_sees_reads_lists_and_asks_about_only_its_own_grades(api):
    url = api.upload(api.a, b"x = 'a'\n", "mine.py").json()["url"]
    assert api.finished(api.a, url)["state"] == "done"
    hidden = api.client.get(url, headers=api.auth(api.b))
    assert hidden.status_code == 404 and "result" not in hidden.text
    assert api.client.get("/v1/grades/AAAAAAAAAAAAAAAAAAAAAA", headers=api.auth(api.a)).status_code == 404
    assert api.client.get("/v1/grades", headers=api.auth(api.b)).json() == {"grades": [], "next": None}
    asked = api.client.post(f"{url}/regrade-requests", headers=api.auth(api.b), json={"reason": "mine now"})
    assert asked.status_code == 404


def test_a_token_revoked_in_the_file_is_refused_from_the_next_request(api):
    assert api.client.get("/v1/grades", headers=api.auth(api.b)).status_code == 200
    time.sleep(0.01)   # the file's modification time moves on: the app reads it again
    token_file.revoke(api.tokens_file, api.b.partition(".")[0])
    assert api.client.get("/v1/grades", headers=api.auth(api.b)).status_code == 401
    assert api.client.get("/v1/grades", headers=api.auth(api.a)).status_code == 200


def test_the_list_pages_through_every_grade_once_oldest_change_first_and_refuses_a_forged_cursor(api):
    started = time.time() - 1
    urls = [api.upload(api.a, f"x = {i}\n".encode(), f"s{i}.py").json()["url"] for i in range(7)]
    for url in urls:
        api.finished(api.a, url)
    seen, cursor, pages = [], None, 0
    while True:
        params = {"since": started, "limit": 3, **({"cursor": cursor} if cursor else {})}
        page = api.client.get("/v1/grades", headers=api.auth(api.a), params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["grades"]) <= 3 and all(g["state"] == "done" and "result" in g for g in body["grades"])
        seen += [g["url"] for g in body["grades"]]
        pages += 1
        cursor = body["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(urls) and len(seen) == len(set(seen)) and pages == 3
    later = api.client.get("/v1/grades", headers=api.auth(api.a), params={"since": time.time() + 60})
    assert later.json() == {"grades": [], "next": None}
    forged = api.client.get("/v1/grades", headers=api.auth(api.a), params={"cursor": "not-one-of-ours"})
    assert forged.status_code == 400
    for limit in (0, MAX_PAGE + 1):
        assert api.client.get("/v1/grades", headers=api.auth(api.a), params={"limit": limit}).status_code == 422


def test_a_regrade_request_needs_a_reason_and_a_finished_grade_of_ones_own(api):
    url = api.upload(api.a, b"x = 'regrade'\n", "r.py").json()["url"]
    api.finished(api.a, url)
    made = api.client.post(f"{url}/regrade-requests", headers=api.auth(api.a), json={"reason": "test 3 is wrong"})
    assert made.status_code == 201 and made.json()["reason"] == "test 3 is wrong"
    for body in ({}, {"reason": 3}, ["reason"]):
        assert api.client.post(f"{url}/regrade-requests", headers=api.auth(api.a), json=body).status_code == 422
    garbled = api.client.post(f"{url}/regrade-requests", headers={**api.auth(api.a), "Content-Type": "application/json"},
                              content=b"{not json")
    assert garbled.status_code == 422


def test_a_busy_engine_is_503_with_retry_after_and_health_says_why_grading_cannot_happen(api):
    assert api.client.get("/healthz").status_code == 200
    api.engine.busy = True
    refused = api.upload(api.a, b"x = 'busy'\n", "b.py")
    assert refused.status_code == 503 and refused.headers["retry-after"] == "60"
    assert "try again" in refused.json()["detail"]
    api.engine.problem = "no worker answers"
    health = api.client.get("/healthz")
    assert health.status_code == 503 and health.json()["problems"] == ["no worker answers"]


def test_an_upload_over_the_size_limit_is_413_and_reaches_no_engine(tmp_path):
    api = Api(tmp_path, max_body_bytes=64 * 1024)
    with api.client:
        answer = api.upload(api.a, b"#" * (128 * 1024), "huge.py")
        assert answer.status_code == 413 and "larger than" in answer.json()["detail"]
        assert api.engine.submitted == []
        assert api.upload(api.a, b"x = 1\n", "small.py").status_code == 202


def test_a_token_past_its_rate_is_429_with_retry_after_and_another_token_is_not(tmp_path):
    api = Api(tmp_path, rate_per_minute=4)
    with api.client:
        codes = [api.client.get("/v1/grades/nothing", headers=api.auth(api.a)) for _ in range(12)]
        assert codes[0].status_code == 404
        limited = [r for r in codes if r.status_code == 429]
        assert limited and int(limited[0].headers["retry-after"]) >= 1
        assert api.client.get("/v1/grades/nothing", headers=api.auth(api.b)).status_code == 404


def test_an_address_past_its_page_upload_rate_is_429_before_any_grade(tmp_path):
    api = Api(tmp_path, page_uploads_per_minute=2)
    with api.client:
        files = {"file": ("x.txt", b"not python")}  # refused by the form: no grade is started
        codes = [api.client.post("/grades", files=files).status_code for _ in range(8)]
        assert codes[0] == 400 and 429 in codes
        assert api.engine.submitted == []


def test_without_the_page_its_routes_are_404_and_the_api_still_answers(tmp_path):
    api = Api(tmp_path, page=False)
    with api.client:
        assert api.client.get("/").status_code == 404
        assert api.client.post("/grades", files={"file": ("x.py", b"x")}).status_code == 404
        assert api.upload(api.a, b"x = 1\n").status_code == 202


def test_without_tokens_every_api_request_is_401_and_health_answers(tmp_path):
    api = Api(tmp_path, page=False)
    app = service_app.create_app(service_app.Settings(engine=api.engine, tokens=None, store_dir=tmp_path / "bare"))
    with TestClient(app) as client:
        assert client.get("/v1/grades/x", headers=api.auth(api.a)).status_code == 401
        assert client.post("/v1/grades", headers=api.auth(api.a), files={"file": ("x.py", b"x")}).status_code == 401
        assert client.get("/healthz").status_code == 200
    assert api.engine.submitted == []


def test_the_page_shows_a_hostile_name_and_feedback_as_text(api):
    hostile = '<script>alert(1)</script>".py'
    answer = api.client.post("/grades", files={"file": (hostile, b"x = '<img src=x onerror=alert(1)>'\n")},
                             follow_redirects=True)
    assert answer.status_code == 200, answer.text[:500]
    assert "<script>alert(1)</script>" not in answer.text and "&lt;script&gt;" in answer.text
    assert answer.headers["content-security-policy"]
    assert "<img src=x" not in answer.text


def test_the_openapi_document_and_health_need_no_token(api):
    spec = api.client.get("/openapi.json").json()
    assert {"/v1/grades", "/v1/grades/{grade_id}", "/v1/grades/{grade_id}/regrade-requests"} <= set(spec["paths"])
    assert api.client.get("/healthz").json()["status"] == "ok"
