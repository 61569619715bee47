"""The service's grades, in a database: who asked for each, its state and result, the upload's
bytes until it is finished (so a grade in flight at a restart is graded after it), the results by
grading key that answer a repeated upload, the regrade requests, and the callbacks still to send.

SQLite by default, through SQLAlchemy: in memory without --store, else one file (WAL) in the store
folder, nothing to install. PostgreSQL (`--database postgresql+psycopg://...`) when several service
processes share the grades. The schema is made and upgraded by Alembic (grader/service/migrations).

A grade id is 128 random bits: on the student page it is the only thing that opens a feedback
page, so it must not be guessable.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Column, Float, Integer, LargeBinary, MetaData, String, Table, Text

from grader.errors import GraderError
from grader.result import JobState

PAGE_OWNER = "page"  # grades uploaded on the student page: no token sees them
MAX_REASON = 2000    # characters of a regrade request: a paragraph, not an essay
MAX_REQUESTS = 5     # per grade: a student asks again, not a script a thousand times
MAX_PAGE = 100       # grades in one answer of GET /v1/grades
DATABASE_FILE = "service.sqlite3"  # in the --store folder
_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")

log = logging.getLogger("grader.service")

metadata = MetaData()
GRADES = Table(
    "grades", metadata,
    Column("id", String(64), primary_key=True),
    Column("owner", String(200), nullable=False),
    Column("key", String(64), nullable=False, index=True),
    Column("name", Text, nullable=False),
    Column("exercise", String(200), nullable=False),
    Column("format", String(32), nullable=False),
    Column("callback_url", Text),
    Column("job", String(200)),
    Column("state", String(16), nullable=False),
    Column("result", Text),          # the native result (JSON), once finished
    Column("upload", LargeBinary),   # the bytes uploaded, until finished: a restart grades them again
    Column("created", Float, nullable=False),
    Column("updated", Float, nullable=False),
    sa.Index("grades_by_owner_and_update", "owner", "updated", "id"),
)
RESULTS = Table(
    "results", metadata,
    Column("key", String(64), primary_key=True),
    Column("result", Text, nullable=False),
    Column("created", Float, nullable=False),
)
REQUESTS = Table(
    "regrade_requests", metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("grade_id", String(64), nullable=False, index=True),
    Column("owner", String(200), nullable=False),
    Column("name", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("score", Float),
    Column("max_score", Float, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created", Float, nullable=False),
)
CALLBACKS = Table(
    "callbacks", metadata,
    Column("id", String(64), primary_key=True),   # the delivery id, inside the signed body
    Column("grade_id", String(64), nullable=False, index=True),
    Column("url", Text, nullable=False),
    Column("state", String(16), nullable=False),  # CallbackState
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("created", Float, nullable=False),
    Column("updated", Float, nullable=False),
)


class CallbackState:
    PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


@dataclass
class Grade:
    """One upload, as its owner sees it."""
    id: str
    owner: str                    # the token id, or PAGE_OWNER
    key: str                      # its grading key
    name: str                     # the upload's file name (as given: shown escaped, never trusted)
    exercise: str
    format: str = "native"
    callback_url: str | None = None
    job: str | None = None        # the engine's job, while it is graded
    state: str = JobState.QUEUED.value
    result: dict | None = None    # the native result, once done or failed
    created: float = field(default_factory=time.time)
    updated: float = 0.0          # when its state last changed (GET /v1/grades?since=)

    @property
    def finished(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class RegradeRequest:
    """A student's request that a grade be looked at again, for the instructor (`grade requests`)."""
    grade_id: str
    owner: str                    # the token id, or PAGE_OWNER
    name: str                     # the upload's file name
    status: str                   # the result's status and score when asked
    score: float | None
    max_score: float
    reason: str
    created: float = field(default_factory=time.time)


@dataclass(frozen=True)
class Callback:
    """One callback of a finished grade: sent until delivered, or given up and said so."""
    id: str
    grade_id: str
    url: str
    state: str
    attempts: int = 0
    last_error: str | None = None


class RequestRefused(GraderError, ValueError):
    """A regrade request that cannot be recorded; the message says why (shown to the student)."""


class BadDatabase(GraderError):
    """A database URL the service cannot use; the message says which and why."""


def database_url(store_dir: Path | None, url: str | None) -> str:
    """The database a service was given: --database as it is, else the SQLite file in --store, else memory."""
    if url:
        return url
    if store_dir is not None:
        store_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # new: the service's alone
        return f"sqlite:///{(store_dir / DATABASE_FILE).resolve()}"
    return "sqlite://"


def database_file(url: str | None) -> Path | None:
    """The file of an SQLite database URL, which no submission may read; None for any other."""
    try:
        parsed = sa.engine.make_url(url) if url else None
    except sa.exc.ArgumentError:
        return None  # refused, with its reason, when the service opens it
    if parsed is None or parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def open_engine(url: str) -> sa.Engine:
    """An SQLAlchemy engine for `url`, checked by connecting; BadDatabase in one line if it cannot be."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError as err:
        raise BadDatabase(f"not a database URL: {url!r} (sqlite:///FILE or postgresql+psycopg://USER@HOST/DB)") from err
    options: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        options["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if parsed.database in (None, "", ":memory:"):
            options["poolclass"] = sa.pool.StaticPool  # one connection: the in-memory database itself
    elif parsed.get_backend_name() == "postgresql":
        options["pool_pre_ping"] = True  # a connection the server dropped is replaced, not used
        options["connect_args"] = {"connect_timeout": 10}
    else:
        raise BadDatabase(f"{parsed.get_backend_name()} is not supported: use sqlite:///FILE or postgresql+psycopg://...")
    try:
        engine = sa.create_engine(parsed, **options)
    except (sa.exc.ArgumentError, ImportError) as err:
        raise BadDatabase(f"cannot use {parsed.render_as_string(hide_password=True)}: {err}") from err
    if parsed.get_backend_name() == "sqlite":
        @sa.event.listens_for(engine, "connect")
        def _pragmas(connection, _record):  # WAL: readers never wait for the writer; busy: wait, don't fail
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
    try:
        with engine.connect():
            pass
    except sa.exc.SQLAlchemyError as err:
        engine.dispose()
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        raise BadDatabase(f"cannot open the database {parsed.render_as_string(hide_password=True)}: {reason}") from err
    return engine


class GradeStore:
    """Grades by id, stored results by grading key, regrade requests and callbacks, in the database
    at `url` (see database_url). Safe to call from several threads."""

    def __init__(self, url: str = "sqlite://", *, legacy_folder: Path | None = None):
        from grader.service.migrations import upgrade
        self.url = url
        self.engine = open_engine(url)
        upgrade(self.engine)
        self._lock = threading.Lock()  # one statement at a time in this process: the in-memory database is one connection
        if legacy_folder is not None:
            self._import_folder(legacy_folder)

    def close(self) -> None:
        self.engine.dispose()

    def healthy(self) -> str | None:
        """None when the database answers; else why not, in one line."""
        try:
            with self._lock, self.engine.connect() as connection:
                connection.execute(sa.select(1))
        except sa.exc.SQLAlchemyError as err:
            return str(getattr(err, "orig", None) or err).strip().splitlines()[0][:300]
        return None

    # --- grades -----------------------------------------------------------------------------

    def new_grade(self, *, upload: bytes | None = None, **fields) -> Grade:
        now = time.time()
        grade = Grade(id=secrets.token_urlsafe(16), created=now, updated=now, **fields)
        row = {**_columns(grade), "upload": None if grade.finished else upload}
        with self._lock, self.engine.begin() as connection:
            connection.execute(GRADES.insert().values(**row))
        return grade

    def get(self, grade_id: str, owner: str) -> Grade | None:
        """The grade `grade_id` if `owner` made it; None for one that does not exist or is another's
        (the caller answers both the same way)."""
        if not isinstance(grade_id, str) or not _ID.match(grade_id):
            return None
        grade = self.grade_by_id(grade_id)
        return grade if grade is not None and secrets.compare_digest(grade.owner, owner) else None

    def upload_of(self, grade: Grade) -> bytes | None:
        """The bytes of an unfinished grade (None once finished, or for one stored without them)."""
        with self._lock, self.engine.connect() as connection:
            return connection.execute(sa.select(GRADES.c.upload).where(GRADES.c.id == grade.id)).scalar()

    def set_job(self, grade: Grade, job: str) -> None:
        grade.job, grade.updated = job, time.time()
        with self._lock, self.engine.begin() as connection:
            connection.execute(GRADES.update().where(GRADES.c.id == grade.id).values(job=job, updated=grade.updated))

    def stored_result(self, key: str) -> dict | None:
        with self._lock, self.engine.connect() as connection:
            text = connection.execute(sa.select(RESULTS.c.result).where(RESULTS.c.key == key)).scalar()
        return json.loads(text) if text is not None else None

    def finish(self, grade: Grade, state: str, result: dict) -> None:
        """Record a grade's end; a result that is not a grader error answers later uploads too."""
        grade.state, grade.result, grade.job, grade.updated = str(state), result, None, time.time()
        text = json.dumps(result)
        with self._lock, self.engine.begin() as connection:
            connection.execute(GRADES.update().where(GRADES.c.id == grade.id).values(
                state=grade.state, result=text, job=None, upload=None, updated=grade.updated))
            if result.get("status") != "error":
                exists = connection.execute(sa.select(RESULTS.c.key).where(RESULTS.c.key == grade.key)).first()
                if exists is None:
                    connection.execute(RESULTS.insert().values(key=grade.key, result=text, created=grade.updated))

    def unfinished(self) -> list[Grade]:
        with self._lock, self.engine.connect() as connection:
            rows = connection.execute(sa.select(*_GRADE_COLUMNS).where(GRADES.c.result.is_(None))
                                      .order_by(GRADES.c.created)).all()
        return [_grade(row) for row in rows]

    def since(self, owner: str, since: float, cursor: str | None = None,
              limit: int = MAX_PAGE) -> tuple[list[Grade], str | None]:
        """`owner`'s grades whose state changed after `since` (seconds since the epoch), oldest change
        first, at most `limit`; and the cursor of the next page (None on the last one)."""
        query = sa.select(*_GRADE_COLUMNS).where(GRADES.c.owner == owner, GRADES.c.updated > since)
        if cursor:
            updated, last_id = _read_cursor(cursor)
            query = query.where(sa.or_(GRADES.c.updated > updated,
                                       sa.and_(GRADES.c.updated == updated, GRADES.c.id > last_id)))
        query = query.order_by(GRADES.c.updated, GRADES.c.id).limit(limit + 1)
        with self._lock, self.engine.connect() as connection:
            rows = connection.execute(query).all()
        grades = [_grade(row) for row in rows[:limit]]
        more = len(rows) > limit and grades
        return grades, (_cursor(grades[-1]) if more else None)

    # --- regrade requests ---------------------------------------------------------------------

    def request_regrade(self, grade: Grade, reason: str) -> RegradeRequest:
        """Record a request to look at a finished grade again; RequestRefused for an empty or
        overlong reason, a grade not finished yet, or one asked about MAX_REQUESTS times."""
        reason = " ".join(str(reason).split())
        if not reason:
            raise RequestRefused("say what should be looked at again")
        if len(reason) > MAX_REASON:
            raise RequestRefused(f"a request is at most {MAX_REASON} characters (this one has {len(reason)})")
        if not grade.finished:
            raise RequestRefused("the grade is not finished yet")
        result = grade.result or {}
        request = RegradeRequest(grade.id, grade.owner, grade.name, str(result.get("status", "")),
                                 result.get("score"), float(result.get("max_score") or 0), reason)
        with self._lock, self.engine.begin() as connection:
            count = connection.execute(sa.select(sa.func.count()).select_from(REQUESTS)
                                       .where(REQUESTS.c.grade_id == grade.id)).scalar_one()
            if count >= MAX_REQUESTS:
                raise RequestRefused(f"this grade has {MAX_REQUESTS} requests already")
            connection.execute(REQUESTS.insert().values(**dataclasses.asdict(request)))
        return request

    def requested(self, grade_id: str) -> bool:
        with self._lock, self.engine.connect() as connection:
            return connection.execute(sa.select(REQUESTS.c.number).where(REQUESTS.c.grade_id == grade_id)
                                      .limit(1)).first() is not None

    def requests(self) -> list[RegradeRequest]:
        """Every regrade request, oldest first."""
        names = [f.name for f in dataclasses.fields(RegradeRequest)]
        with self._lock, self.engine.connect() as connection:
            rows = connection.execute(sa.select(*(REQUESTS.c[n] for n in names))
                                      .order_by(REQUESTS.c.created, REQUESTS.c.number)).all()
        return [RegradeRequest(**row._asdict()) for row in rows]

    # --- callbacks ----------------------------------------------------------------------------

    def new_callback(self, grade: Grade) -> Callback:
        assert grade.callback_url  # only a grade that named one has a callback
        callback = Callback(secrets.token_urlsafe(16), grade.id, grade.callback_url, CallbackState.PENDING)
        now = time.time()
        with self._lock, self.engine.begin() as connection:
            connection.execute(CALLBACKS.insert().values(**dataclasses.asdict(callback), created=now, updated=now))
        return callback

    def callback_attempted(self, callback_id: str, error: str | None, final: bool) -> None:
        """Record one attempt of a callback: delivered when `error` is None, else failed for good
        when `final`; the count of attempts and the last error are the database's."""
        state = CallbackState.DELIVERED if error is None else CallbackState.FAILED if final else CallbackState.PENDING
        values: dict[str, Any] = {"state": state, "attempts": CALLBACKS.c.attempts + 1, "updated": time.time()}
        if error is not None:
            values["last_error"] = error
        with self._lock, self.engine.begin() as connection:
            connection.execute(CALLBACKS.update().where(CALLBACKS.c.id == callback_id).values(**values))

    def last_callbacks(self, grade_ids: list[str]) -> dict[str, Callback]:
        """The latest callback of each of these grades that has one, in one query (a page of
        GET /v1/grades?since= shows up to MAX_PAGE grades)."""
        found: dict[str, Callback] = {}
        for callback in self._callbacks(CALLBACKS.c.grade_id.in_(grade_ids)) if grade_ids else ():
            found[callback.grade_id] = callback  # oldest first: the last one stays
        return found

    def pending_callbacks(self) -> list[Callback]:
        return self._callbacks(CALLBACKS.c.state == CallbackState.PENDING)

    def _callbacks(self, where) -> list[Callback]:
        with self._lock, self.engine.connect() as connection:
            rows = connection.execute(sa.select(*_CALLBACK_COLUMNS).where(where).order_by(CALLBACKS.c.created)).all()
        return [Callback(**row._asdict()) for row in rows]

    def grade_by_id(self, grade_id: str) -> Grade | None:
        """Any grade, whoever made it: for the service's own work (callbacks), never for an answer."""
        with self._lock, self.engine.connect() as connection:
            row = connection.execute(sa.select(*_GRADE_COLUMNS).where(GRADES.c.id == grade_id)).first()
        return _grade(row) if row is not None else None

    # --- the folder of earlier versions ----------------------------------------------------------

    def _import_folder(self, folder: Path) -> None:
        """The JSON files an earlier version kept in the store folder (grades/, results/, requests/),
        taken into the database once, then renamed so they are not taken again."""
        names = {f.name for f in dataclasses.fields(Grade)}
        request_names = {f.name for f in dataclasses.fields(RegradeRequest)}
        for sub in ("grades", "results", "requests"):
            for path in sorted((folder / sub).glob("*.json")) if (folder / sub).is_dir() else ():
                try:
                    document = json.loads(path.read_text(encoding="utf-8"))
                    with self._lock, self.engine.begin() as connection:
                        if sub == "grades":
                            grade = Grade(**{k: v for k, v in document.items() if k in names})
                            grade.updated = grade.updated or grade.created
                            if _ID.match(grade.id):
                                connection.execute(GRADES.insert().values(**_columns(grade), upload=None))
                        elif sub == "results":
                            connection.execute(RESULTS.insert().values(key=path.stem, result=json.dumps(document),
                                                                       created=time.time()))
                        else:
                            request = RegradeRequest(**{k: v for k, v in document.items() if k in request_names})
                            connection.execute(REQUESTS.insert().values(**dataclasses.asdict(request)))
                except (OSError, ValueError, TypeError, sa.exc.IntegrityError) as err:
                    log.warning("store: %s not imported: %s", path, err)
                    continue
                path.rename(path.with_name(path.name + ".imported"))


_GRADE_COLUMNS = [GRADES.c[f.name] for f in dataclasses.fields(Grade)]
_CALLBACK_COLUMNS = [CALLBACKS.c[f.name] for f in dataclasses.fields(Callback)]


def _columns(grade: Grade) -> dict:
    row = dataclasses.asdict(grade)
    row["result"] = json.dumps(grade.result) if grade.result is not None else None
    row["state"] = str(grade.state)
    return row


def _grade(row) -> Grade:
    values = row._asdict()
    values["result"] = json.loads(values["result"]) if values["result"] is not None else None
    return Grade(**values)


def _cursor(grade: Grade) -> str:
    return base64.urlsafe_b64encode(json.dumps([grade.updated, grade.id]).encode()).decode().rstrip("=")


def _read_cursor(cursor: str) -> tuple[float, str]:
    try:
        updated, grade_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return float(updated), str(grade_id)
    except (ValueError, TypeError) as err:
        raise BadCursor("not a cursor this service gave: ask again without one") from err


class BadCursor(GraderError, ValueError):
    """A page cursor the service did not give."""


def load_requests(store_dir: Path | None = None, url: str | None = None) -> list[RegradeRequest]:
    """The regrade requests of a service's database (`grade requests`)."""
    store = GradeStore(database_url(store_dir, url), legacy_folder=store_dir)
    try:
        return store.requests()
    finally:
        store.close()
