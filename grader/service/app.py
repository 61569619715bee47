"""The HTTP service: API v1 for platforms (Bearer tokens), and the student page.

    POST /v1/grades        multipart `file` [+ `exercise`, `format`, `callback_url`]
                           -> 202 {"id", "state": "queued", "url"}; an upload graded before (same
                           bytes, name, exercise, grader, sandbox, limits) -> 200 with its result
    GET  /v1/grades/{id}   -> {"id", "state": "queued|running|done|failed", "result": ... once finished,
                               "callback": {"state", "attempts", "last_error"} when one was asked}
    GET  /v1/grades?since=T[&cursor=C][&limit=N]   -> {"grades": [...], "next": C or null}: this
                           token's grades whose state changed after T (Unix time), oldest first
    POST /v1/grades/{id}/regrade-requests   JSON {"reason"} -> 201 the request, listed by `grade requests`
    GET  /healthz          -> {"status": "ok", "database": "ok", ...the engine's}; 503 with "problems"
                           when grading cannot happen (database, queue, no worker, sandbox)
    GET  /  and /grades/…  the student page (no token; off with --no-page)

A token sees only the grades it made: another's id answers 404, as an unknown one does. Auth and
rate limits are checked before the body is read (ApiGuard), and the size limit as it arrives
(limits.BodyLimit), so a refused upload costs the service almost nothing.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import FastAPI, File, Form, HTTPException, Query, Request, Security, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPBearer
from starlette.requests import ClientDisconnect

from grader.errors import GraderError
import exercise as exercises
from grader import __version__, formats, grading, keys
from grader import submission as submissions
from grader.pool import failed_result
from grader.result import GradeResult, JobState, Status
from grader.service import callbacks, engines, fairness, student_page
from grader.service.throttle import BodyLimit, RateLimiter
from grader.service.store import (
    MAX_PAGE,
    PAGE_OWNER,
    BadCursor,
    Callback,
    Grade,
    GradeStore,
    RequestRefused,
    database_url,
)
from grader.service.tokens import Token, Tokens

# The largest submission the grader takes (a notebook), plus room for the multipart envelope.
MAX_BODY_BYTES = submissions.MAX_NOTEBOOK_BYTES + 64 * 1024
FOLLOW_WAIT_S = 30.0          # one wait for a result; waited again while the grade is still on its way
FOLLOW_GIVE_UP_S = 6 * 3600   # a grade with no result after this long is recorded as failed
DISPATCH_RETRY_S = 5.0        # an engine that refused a waiting upload is tried again after this
SUFFIXES = grading.SUBMISSION_SUFFIXES

log = logging.getLogger("grader.service")


@dataclass(frozen=True)
class Settings:
    """How `grade serve` was started."""
    engine: engines.Engine
    tokens: Tokens | None = None        # None: the API answers every request 401
    store_dir: Path | None = None       # the SQLite file's folder (and an earlier version's JSON files)
    database_url: str | None = None     # instead: any database SQLAlchemy reaches (PostgreSQL)
    page: bool = True
    rate_per_minute: float = 600.0      # API requests per token
    page_uploads_per_minute: float = 10.0  # page uploads per address
    max_body_bytes: int = MAX_BODY_BYTES
    sandbox: str = grading.DEFAULT_SANDBOX
    callback_backoff_s: tuple[float, ...] = callbacks.BACKOFF_S
    callback_policy: callbacks.CallbackPolicy = callbacks.CallbackPolicy()  # public addresses only
    backlog: int = 1000                 # uploads waiting for a slot, at most; beyond, 503


class UploadError(GraderError):
    """An upload the service refuses before grading it (HTTP 400 on the API; the form again on the page)."""


class Service:
    """The grades in flight and finished. An upload waits in the fair queue (fairness.FairQueue)
    until a slot is free for its client, then goes to the engine; a follower waits for each job's
    result, records it for every grade waiting on it, charges the slot time to the client, and
    sends the callbacks."""

    def __init__(self, settings: Settings):
        self.settings, self.engine = settings, settings.engine
        self.store = GradeStore(database_url(settings.store_dir, settings.database_url),
                                legacy_folder=settings.store_dir)
        self.waiting: dict[str, list[Grade]] = {}   # engine job -> the grades it answers
        self.by_key: dict[str, str] = {}             # grading key -> the job grading it now
        self.held: dict[str, list[Grade]] = {}       # grading key -> its grades, waiting in the fair queue
        self.fair = fairness.FairQueue(vouched=lambda client: not client.startswith("page:"))
        self._clients: dict[str, str] = {}           # grading key -> the client whose slot grades it
        self._slots = 1                              # the engine's slots, as last asked
        # Followers block on the engine's result; their own threads keep the event loop's free.
        self._followers = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="follow")
        self._tasks: set[asyncio.Task] = set()   # followers and callbacks: kept so none is collected
        self._retry: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        """Pick up what an earlier run left unfinished: a grade whose job may still answer (the
        queue) is followed again, any other waits in the fair queue to be graded again from its
        stored upload (an embedded pool's jobs died with it); callbacks not yet delivered are sent."""
        await self._ask_slots()
        for grade in self.store.unfinished():
            client = f"restart:{grade.owner}"
            if grade.job and isinstance(self.engine, engines.Queued):
                self.fair.start(client)
                self._follow(grade.job, [grade], client)
            elif grade.key in self.held:
                self.held[grade.key].append(grade)
            elif self.store.upload_of(grade) is None:
                self.store.finish(grade, JobState.FAILED, failed_result(
                    grade.name, "the service restarted before this grade finished; upload the file again",
                    exercise=grade.exercise, sandbox=self.settings.sandbox))
            else:
                self.held[grade.key] = [grade]
                self.fair.add(client, grade.key)
        await self._dispatch()
        for callback in self.store.pending_callbacks():
            pending = self.store.grade_by_id(callback.grade_id)
            if pending is not None and pending.finished:
                self._send(pending, callback)

    async def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._followers.shutdown(wait=False, cancel_futures=True)
        await asyncio.get_running_loop().run_in_executor(None, self.engine.close)
        self.store.close()

    # --- uploads ----------------------------------------------------------------------------

    async def upload(self, data: bytes, name: str, *, owner: str, exercise: str, fmt: str = "native",
                     callback_url: str | None = None, client: str | None = None) -> Grade:
        """A grade for this upload: answered from the stored result, attached to the same upload
        being graded or waiting now, sent to the engine when `client` (who is charged for its slot
        time; default: the owner) may have a slot now, else queued fairly behind the others.
        Raises UploadError, or engines.EngineBusy when it cannot be graded now."""
        if not name.lower().endswith(SUFFIXES):
            raise UploadError(f"upload a .py or .ipynb file (this one is called {name!r})")
        if exercise not in exercises.all_exercises():
            raise UploadError(f"unknown exercise {exercise!r}; known: {', '.join(sorted(exercises.all_exercises()))}")
        if fmt not in formats.FORMATS:
            raise UploadError(f"unknown format {fmt!r}; known: {', '.join(formats.FORMATS)}")
        if callback_url is not None:
            try:
                await self.settings.callback_policy.address(callback_url)
            except callbacks.CallbackRefused as err:
                raise UploadError(str(err)) from err
        client = client or f"token:{owner}"
        key = keys.upload_key(data, name, exercise=exercise, sandbox=self.settings.sandbox, time_limit=None)
        fields: dict[str, Any] = dict(owner=owner, key=key, name=name, exercise=exercise, format=fmt, callback_url=callback_url)
        stored = self.store.stored_result(key)
        if stored is not None:
            grade = self.store.new_grade(**fields)
            self._finish([grade], stored)
            return grade
        job = self.by_key.get(key)
        if job is not None:  # the same upload is being graded now
            grade = self.store.new_grade(**fields, job=job, upload=data)
            self.waiting[job].append(grade)
            return grade
        if key in self.held:  # the same upload waits for a slot
            grade = self.store.new_grade(**fields, upload=data)
            self.held[key].append(grade)
            return grade
        loop = asyncio.get_running_loop()
        if self.fair.could_start(client, self._slots):
            self.fair.start(client)
            try:
                job = await loop.run_in_executor(None, partial(self.engine.submit, data, name, exercise=exercise))
            except BaseException:
                self.fair.finished(client, 0.0)
                raise
            grade = self.store.new_grade(**fields, job=job, upload=data)
            self._follow(job, [grade], client)
            return grade
        if len(self.fair) >= self.settings.backlog:
            raise engines.EngineBusy(f"{len(self.fair)} uploads are waiting to be graded; try again in a few minutes")
        _, problem = await loop.run_in_executor(None, self.engine.health)
        if problem:
            raise engines.EngineBusy.unavailable(problem)
        grade = self.store.new_grade(**fields, upload=data)
        self.held[key] = [grade]
        self.fair.add(client, key)
        await self._dispatch()  # the engine may have more slots than last asked (a queue's new workers)
        return grade

    async def _ask_slots(self) -> None:
        self._slots = max(1, await asyncio.get_running_loop().run_in_executor(None, self.engine.slots))

    async def _dispatch(self) -> None:
        """Send the engine the waiting uploads the fair queue picks, while slots are free. An
        engine that refuses one (the queue is away) leaves it first in line, tried again soon."""
        if not len(self.fair):
            return
        await self._ask_slots()
        loop = asyncio.get_running_loop()
        while (chosen := self.fair.next(self._slots)) is not None:
            client, key = chosen
            grades = self.held.pop(key)
            data = self.store.upload_of(grades[0])
            if data is None:  # finished meanwhile (cannot happen while held), or stored without bytes
                self.fair.finished(client, 0.0)
                self._finish(grades, failed_result(grades[0].name, "the upload was lost before it was graded; "
                                                   "upload the file again", exercise=grades[0].exercise,
                                                   sandbox=self.settings.sandbox))
                continue
            try:
                job = await loop.run_in_executor(None, partial(self.engine.submit, data, grades[0].name,
                                                               exercise=grades[0].exercise))
            except engines.EngineBusy as err:
                self.fair.finished(client, 0.0)
                self.fair.add(client, key, first=True)
                self.held[key] = grades + self.held.pop(key, [])
                log.warning("a waiting upload could not be sent to the engine (%s); trying again in %g s",
                            err, DISPATCH_RETRY_S)
                if self._retry is None:
                    self._retry = loop.call_later(DISPATCH_RETRY_S, self._retry_dispatch)
                return
            for grade in grades:
                self.store.set_job(grade, job)
            self._follow(job, grades, client)

    def _retry_dispatch(self) -> None:
        self._retry = None
        self._spawn(self._dispatch())

    def _follow(self, job: str, grades: list[Grade], client: str) -> None:
        """Wait for `job`'s result for these grades, `client` holding a slot meanwhile. A job already
        followed (the queue gives the same upload the same job) takes them, and the slot goes back."""
        if job in self.waiting:
            self.waiting[job].extend(grades)
            self.fair.finished(client, 0.0)
            return
        self.waiting[job] = list(grades)
        self.by_key[grades[0].key] = job
        self._clients[grades[0].key] = client
        self._spawn(self._wait_for(job, grades[0].key))

    async def _wait_for(self, job: str, key: str) -> None:
        loop = asyncio.get_running_loop()
        waited, began = 0.0, time.monotonic()
        while True:
            try:
                result = await loop.run_in_executor(self._followers,
                                                    partial(self.engine.result, job, timeout=FOLLOW_WAIT_S))
                break
            except TimeoutError:
                waited += FOLLOW_WAIT_S
                if waited < FOLLOW_GIVE_UP_S:
                    continue
                message = f"no result came within {FOLLOW_GIVE_UP_S / 3600:g} hours"
            except Exception as err:  # noqa: BLE001  (a lost job is that grade's error, not the service's end)
                message = f"the grade was lost: {type(err).__name__}: {err}"
            grade = self.waiting[job][0]
            result = failed_result(grade.name, message, exercise=grade.exercise, sandbox=self.settings.sandbox)
            break
        if self.by_key.get(key) == job:
            del self.by_key[key]
        # the slot's time: the grade's own duration (a queue's wait for a worker is not its slot's)
        held_s = float(result.get("duration_s") or 0.0) or time.monotonic() - began
        self.fair.finished(self._clients.pop(key, "?"), held_s)
        self._finish(self.waiting.pop(job, []), result)
        await self._dispatch()

    def _finish(self, grades: list[Grade], result: dict) -> None:
        state = JobState.FAILED if result.get("status") == Status.ERROR else JobState.DONE
        for grade in grades:
            self.store.finish(grade, state, result)
            if grade.callback_url:
                self._send(grade, self.store.new_callback(grade))

    def _send(self, grade: Grade, callback: Callback) -> None:
        """Deliver a finished grade's callback, each attempt recorded in the store."""
        token = self.settings.tokens.get(grade.owner) if self.settings.tokens else None
        if token is None:  # the token was removed since: nobody to sign for
            self.store.callback_attempted(callback.id, error="the token that asked for it was removed", final=True)
            return
        document = {k: v for k, v in self.document(grade).items() if k != "callback"}
        self._spawn(callbacks.deliver(callback.url, document, secret=token.signing_secret, grade_id=grade.id,
                                      delivery_id=callback.id,
                                      attempted=partial(self.store.callback_attempted, callback.id),
                                      backoff_s=self.settings.callback_backoff_s,
                                      policy=self.settings.callback_policy, made=callback.attempts))

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- reading ----------------------------------------------------------------------------

    async def state(self, grade: Grade) -> str:
        """A grade's state; a job the engine has finished counts as running until its result is recorded."""
        if grade.finished:
            return grade.state
        job = grade.job
        if job is None:  # waiting for a slot, or finished since (the store clears the job): being recorded
            return JobState.QUEUED if grade.key in self.held else JobState.RUNNING
        try:
            state = await asyncio.get_running_loop().run_in_executor(None, self.engine.state, job)
        except KeyError:  # the engine has handed its result over: it is being recorded
            return JobState.RUNNING
        except Exception:  # noqa: BLE001  (the broker is away for a moment: the grade is still queued)
            return JobState.QUEUED
        return JobState.RUNNING if state in (JobState.DONE, JobState.FAILED) else state

    def document(self, grade: Grade, state: str | None = None, last_callbacks: dict | None = None) -> dict:
        """What GET /v1/grades/ID answers, and what a callback carries (`last_callbacks`: the
        grades' latest callbacks, read already for a page of them)."""
        document: dict[str, Any] = {"id": grade.id, "state": state or grade.state, "url": f"/v1/grades/{grade.id}"}
        if grade.result is not None:  # finished
            document["result"] = (grade.result if grade.format == "native"
                                  else formats.to_format(GradeResult.from_dict(grade.result), grade.format))
        if grade.callback_url:
            sent = (last_callbacks if last_callbacks is not None else self.store.last_callbacks([grade.id])).get(grade.id)
            document["callback"] = ({"state": sent.state, "attempts": sent.attempts, "last_error": sent.last_error}
                                    if sent else {"state": "waiting", "attempts": 0, "last_error": None})
        return document


class ApiGuard:
    """ASGI wrapper that refuses an API request without a valid token (401) or over its token's
    rate (429), and a page upload over its address's rate (429), before anything reads the body."""

    def __init__(self, app, settings: Settings):
        self.app, self.tokens = app, settings.tokens
        self.api_rate = RateLimiter(settings.rate_per_minute)
        self.page_rate = RateLimiter(settings.page_uploads_per_minute)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if path.startswith("/v1/"):
            token = self._token(scope)
            if token is None:
                return await _answer(send, 401, "a valid 'Authorization: Bearer TOKEN' header is needed",
                                     [(b"www-authenticate", b"Bearer")])
            wait = self.api_rate.allow(token.id)
            if wait:
                return await _answer(send, 429, "too many requests for this token",
                                     [(b"retry-after", str(math.ceil(wait)).encode())])
            scope.setdefault("state", {})["token"] = token
        elif scope.get("method") == "POST" and (path == "/grades" or path.endswith("/regrade-request")):
            address = (scope.get("client") or ("?", 0))[0]
            wait = self.page_rate.allow(address)
            if wait:
                return await _answer(send, 429, f"Too many uploads came from your address: try again in "
                                     f"{math.ceil(wait)} seconds.", [(b"retry-after", str(math.ceil(wait)).encode())],
                                     page=True)
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            pass  # the client went, or its connection was cut (server.GuardedH11): nobody to answer

    def _token(self, scope) -> Token | None:
        header = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip() or self.tokens is None:
            return None
        return self.tokens.check(credentials.strip())


async def _answer(send, status: int, detail: str, headers: list, *, page: bool = False) -> None:
    """An answer made before FastAPI sees the request: JSON {"detail"} for a program, or for the
    student page an HTML page that says the same in its own words."""
    if page:
        body = student_page.problem(status, detail or None).encode()
        kind = [(b"content-type", b"text/html; charset=utf-8"),
                *((k.lower().encode(), v.encode()) for k, v in student_page.SECURITY_HEADERS.items())]
    else:
        body, kind = json.dumps({"detail": detail}).encode(), [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status,
                "headers": [*kind, (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def create_app(settings: Settings):
    """The ASGI application `grade serve` runs: FastAPI inside the guard and the body limit."""
    service = Service(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_):
        await service.start()
        try:
            yield
        finally:
            await service.close()

    api = FastAPI(title="attention-grader", version=__version__, lifespan=lifespan,
                  description="Grade a submission over HTTP. Every /v1 request needs "
                              "`Authorization: Bearer TOKEN` (made by `grade token new`).")
    bearer = HTTPBearer(auto_error=False, description="A token made by `grade token new NAME --tokens FILE`.")

    authorized = [Security(bearer)]  # shown on /docs; the check itself is ApiGuard's, before the body is read

    @api.get("/healthz", tags=["service"],
             responses={503: {"description": "grading cannot happen now: `problems` says why"}})
    async def healthz():
        """For a load balancer and an operator: each dependency's state (the database; the queue and
        the workers seen, or the sandbox), 200 when uploads can be graded, else 503 and why."""
        loop = asyncio.get_running_loop()
        database, (engine, engine_problem) = await asyncio.gather(
            loop.run_in_executor(None, service.store.healthy), loop.run_in_executor(None, service.engine.health))
        problems = [f"the database does not answer: {database}"] if database else []
        problems += [engine_problem] if engine_problem else []
        document = {"status": "unavailable" if problems else "ok", "database": database or "ok", **engine,
                    "waiting": len(service.fair)}
        if problems:
            return JSONResponse({**document, "problems": problems}, status_code=503)
        return document

    @api.post("/v1/grades", status_code=202, tags=["grades"], dependencies=authorized,
              responses={200: {"description": "graded before: the stored result"},
                         400: {"description": "not an upload the grader takes"},
                         401: {"description": "no valid token"}, 413: {"description": "larger than the limit"},
                         429: {"description": "too many requests for this token"}})
    async def post_grade(request: Request, file: UploadFile = File(..., description="the .py or .ipynb"),
                         exercise: str = Form(exercises.DEFAULT), format: str = Form("native"),  # noqa: A002
                         callback_url: str | None = Form(None)):
        """Grade an upload. Answers 202 with the grade's id and URL; GET it until `state` is done or
        failed, or give `callback_url` to be sent the same document once it is finished."""
        data = await file.read()
        try:
            grade = await service.upload(data, file.filename or "submission.py", owner=request.state.token.id,
                                         exercise=exercise, fmt=format, callback_url=callback_url or None)
        except UploadError as err:
            raise HTTPException(400, str(err)) from err
        except engines.EngineBusy as err:
            raise HTTPException(503, str(err), headers={"Retry-After": "60"}) from err
        if grade.finished:
            return JSONResponse(service.document(grade), status_code=200)
        return JSONResponse({"id": grade.id, "state": JobState.QUEUED, "url": f"/v1/grades/{grade.id}"},
                            status_code=202)

    @api.get("/v1/grades", tags=["grades"], dependencies=authorized,
             responses={400: {"description": "a cursor this service did not give"}})
    async def list_grades(request: Request, since: float = 0.0, cursor: str | None = None,
                          limit: int = Query(MAX_PAGE, ge=1, le=MAX_PAGE)):
        """This token's grades whose state changed after `since` (Unix time), the oldest change
        first, `limit` at a time: ask again with `cursor` set to `next` until it is null."""
        try:
            found, after = service.store.since(request.state.token.id, since, cursor, limit)
        except BadCursor as err:
            raise HTTPException(400, str(err)) from err
        sent = service.store.last_callbacks([grade.id for grade in found if grade.callback_url])
        return {"grades": [service.document(grade, last_callbacks=sent) for grade in found], "next": after}

    @api.get("/v1/grades/{grade_id}", tags=["grades"], dependencies=authorized,
             responses={404: {"description": "no grade of this token has this id"}})
    async def get_grade(request: Request, grade_id: str):
        """A grade's state, and its result in the format asked at upload once it is finished."""
        grade = service.store.get(grade_id, request.state.token.id)
        if grade is None:
            raise HTTPException(404, "no grade of this token has this id")
        return service.document(grade, await service.state(grade))

    @api.post("/v1/grades/{grade_id}/regrade-requests", tags=["grades"], dependencies=authorized, status_code=201,
              responses={404: {"description": "no grade of this token has this id"},
                         422: {"description": "no reason, too long a one, a grade not finished, too many requests"}})
    async def post_regrade_request(request: Request, grade_id: str):
        """Ask the instructor to look at a finished grade again: JSON {"reason": "..."}."""
        grade = service.store.get(grade_id, request.state.token.id)
        if grade is None:
            raise HTTPException(404, "no grade of this token has this id")
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("reason"), str):
            raise HTTPException(422, 'send JSON {"reason": "what should be looked at again"}')
        try:
            recorded = service.store.request_regrade(grade, body["reason"])
        except RequestRefused as err:
            raise HTTPException(422, str(err)) from err
        return {"grade_id": recorded.grade_id, "reason": recorded.reason, "created": recorded.created}

    if settings.page:
        _page_routes(api, service, settings)
        _page_errors(api)

    async def too_large(scope, send, limit: int) -> None:
        page = student_page.is_page(scope.get("path", "")) and settings.page
        # the page says it in its own words (the limit of each kind of file), a program gets the bytes
        await _answer(send, 413, "" if page else f"the upload is larger than {limit:,} bytes",
                      [(b"connection", b"close")], page=page)
    return ApiGuard(BodyLimit(api, settings.max_body_bytes, answer=too_large), settings)


def _page_errors(api: FastAPI) -> None:
    """Every error a page request meets is a page: FastAPI's own (404, 405, a form it cannot read)
    answer a program with JSON and a student with HTML."""
    from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    def page(status: int) -> HTMLResponse:
        return _html(student_page.problem(status), status)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException):
        return page(err.status_code) if student_page.is_page(request.url.path) else \
            await http_exception_handler(request, err)

    @api.exception_handler(RequestValidationError)
    async def unreadable(request: Request, err: RequestValidationError):
        return page(400) if student_page.is_page(request.url.path) else \
            await request_validation_exception_handler(request, err)

    @api.exception_handler(Exception)
    async def fault(request: Request, err: Exception):
        if isinstance(err, ClientDisconnect):  # nobody to answer (ApiGuard lets it end quietly)
            return Response(status_code=400)
        log.exception("an error answering %s %s", request.method, request.url.path)
        if student_page.is_page(request.url.path):
            return page(500)
        return JSONResponse({"detail": "internal error"}, status_code=500)


def _html(text: str, status: int = 200) -> HTMLResponse:
    """A page of the student page's, with its security headers."""
    return HTMLResponse(text, status_code=status, headers=student_page.SECURITY_HEADERS)


def _page_routes(api: FastAPI, service: Service, settings: Settings) -> None:

    @api.get("/", include_in_schema=False)
    async def form():
        return _html(student_page.form())

    @api.post("/grades", include_in_schema=False)
    async def upload(request: Request, file: UploadFile | None = File(None), exercise: str = Form(exercises.DEFAULT)):
        if file is None or not file.filename:
            return _html(student_page.form(error="Choose a file to upload.", chosen=exercise), 400)
        data = await file.read()
        oversize = student_page.too_large(file.filename, len(data))
        if oversize:  # what grading would reject: said on the form, before any sandbox starts
            return _html(student_page.form(error=oversize, chosen=exercise), 413)
        address = request.client.host if request.client else "?"
        try:
            grade = await service.upload(data, file.filename, owner=PAGE_OWNER, exercise=exercise,
                                         client=f"page:{address}")
        except UploadError as err:
            return _html(student_page.form(error=str(err), chosen=exercise), 400)
        except engines.EngineBusy as err:
            return _html(student_page.form(error=str(err), chosen=exercise), 503)
        return RedirectResponse(f"/grades/{grade.id}", status_code=303)

    @api.get("/grades/{grade_id}", include_in_schema=False)
    async def feedback(grade_id: str):
        grade = service.store.get(grade_id, PAGE_OWNER)
        if grade is None:
            return _html(student_page.not_found(), 404)
        if grade.result is None:  # not finished
            return _html(student_page.waiting(name=grade.name, state=await service.state(grade)))
        return _html(student_page.feedback(GradeResult.from_dict(grade.result), grade_id=grade.id,
                                  requested=service.store.requested(grade.id)))

    @api.post("/grades/{grade_id}/regrade-request", include_in_schema=False)
    async def regrade_request(grade_id: str, reason: str = Form("")):
        grade = service.store.get(grade_id, PAGE_OWNER)
        if grade is None:
            return _html(student_page.not_found(), 404)
        try:
            service.store.request_regrade(grade, reason)
        except RequestRefused as err:
            if grade.result is None:  # not finished
                return _html(student_page.waiting(name=grade.name, state=await service.state(grade)), 400)
            return _html(student_page.feedback(GradeResult.from_dict(grade.result), grade_id=grade.id,
                                      request_error=str(err)), 400)
        return RedirectResponse(f"/grades/{grade.id}", status_code=303)
