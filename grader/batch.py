"""Regrade a whole class: every submission in a folder, N at a time, into an output folder.

    OUT/results/<name>.json   each submission's native result JSON
    OUT/pages/<name>.html     each submission's feedback, as the student sees it on the terminal
    OUT/runs/<name>.json      the harness's raw report the result was scored from (for rescoring)
    OUT/index.json            what was graded, with the key it was graded under (for resuming)
    OUT/gradebook.csv         one line per submission
    OUT/report.html           the class report (score histogram, bugs, weakest tests)
    OUT/similar.csv, .json    pairs of submissions much alike (grader.similarity), all of them
    OUT/lms.csv               with a late policy or adjustments (grader.term): final scores for an LMS

A submission is a .py or .ipynb file directly in the folder, or a sub-folder (a folder per student),
where the one file that defines the exercise's class is graded. Each is keyed by the hash of what is
graded, the exercise's fingerprint (version, tests and their points), the grader's version, the
sandbox and the time limit (the run key: what the sandbox ran), and by the course's weights (the
score key); a rerun grades only what has no result under its current key, or everything with
`force`, and one whose run key is unchanged is rescored from its stored run, without a sandbox. A grader failure is
that submission's result (status error, never kept for a rerun), not the end of the batch; an
interrupt keeps every result recorded so far.
"""
from __future__ import annotations

import csv
import fcntl
import functools
import hashlib
import io
import json
import os
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import exercise as exercises
from grader import classpage, classreport, feedback_pages, formats, grading, keys, instructor_sections, similarity, term, text
from grader import clusters as behaviours
from grader import submission as submissions
from grader.course import time_limit
from grader.errors import GraderError, SubmissionRejected
from grader.pool import Grader, Pool, PoolClosed
from grader.result import GradeResult, Status

INDEX_SCHEMA = 1


@dataclass(frozen=True)
class Handin:
    """One student's submission: the file to grade, or why there is none to pick."""
    key: str                     # its name in the batch folder: a file name, or a folder name
    path: Path | None            # the file to grade
    rejection: str = ""          # a folder with no file to grade (none, or no way to choose)
    content: bytes = b""         # the file's bytes, read once: graded, hashed, compared with classmates'

    @functools.cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    def grading_key(self, fingerprint: str) -> str:
        """The hash of what is graded and of a run's or a score's `fingerprint` (grader.keys)."""
        return keys.grading_key(self.content, fingerprint, self.rejection)


def discover(folder: Path, exercise: str) -> list[Handin]:
    """The submissions in `folder`, by name; hidden entries and __pycache__ are skipped. Whatever
    an entry is (a link, a huge or unreadable file, a folder nested too deep, a name that is not
    UTF-8), it is that submission's handin, never the end of the batch."""
    handins = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith((".", "__")):
            continue
        try:
            handin = _handin(folder / entry.name, entry, exercise)
        except Exception as err:  # noqa: BLE001  (one entry, however broken, costs only its own row)
            handin = Handin(entry.name, None, f"{entry.name} cannot be read: {type(err).__name__}")
        if handin is not None:
            handins.append(handin)
    return handins


def _handin(path: Path, entry: os.DirEntry, exercise: str) -> Handin | None:
    """The handin of one entry of the batch folder; None for a file that is no submission (notes, data)."""
    if entry.is_symlink():  # never followed: it may point at a classmate's file or anywhere else
        if path.suffix not in grading.SUBMISSION_SUFFIXES and not path.is_dir():
            return None
        return Handin(entry.name, None, f"{entry.name} is a link, not a file: upload the file itself")
    if entry.is_dir(follow_symlinks=False):
        try:
            found = grading.find_submission(path, exercise=exercise)
            return Handin(entry.name, found, content=submissions.read_bytes(found))
        except SubmissionRejected as rejected:
            try:
                listing = "\n".join(sorted(str(p.relative_to(path)) for p in grading.upload_files(path)))
            except SubmissionRejected:
                listing = ""
            return Handin(entry.name, None, rejected.message, listing.encode(errors="surrogateescape"))
    if path.suffix not in grading.SUBMISSION_SUFFIXES:
        return None
    try:
        return Handin(entry.name, path, content=submissions.read_bytes(path))
    except SubmissionRejected as rejected:
        return Handin(entry.name, None, rejected.message)


@dataclass
class Outcome:
    """How a batch run went: what it graded now, what it kept from before, and whether it was cut short."""
    handins: list[Handin]
    graded_now: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    rescored: list[str] = field(default_factory=list)   # scored again from stored runs, no sandbox
    rescore_s: float = 0.0
    interrupted: bool = False
    rows: list[classreport.Row] = field(default_factory=list)
    duration_s: float = 0.0
    sandbox_starts: int = 0      # warm sandboxes started, restarts included
    failure: str = ""            # why the batch stopped before the end, when it was not Ctrl-C
    clusters: tuple = ()         # the report's clusters of unexplained mistakes (grader.clusters.Cluster)
    standings: dict | None = None  # grader.term.Standing by key, with a late policy or adjustments
    similar_pairs: int = 0       # pairs of similar submissions found (all in similar.csv)
    similar: similarity.Findings | None = None   # those pairs, once reported

    @property
    def errors(self) -> list[str]:
        return [row.submission for row in self.rows if row.status == Status.ERROR.value]


class BatchBusy(GraderError):
    """Another batch is writing to the same output folder."""


class Batch:
    """One regrade of `folder` into `out`."""

    def __init__(self, folder: Path, out: Path, *, exercise: str = exercises.DEFAULT,
                 sandbox: str = grading.DEFAULT_SANDBOX, jobs: int = 1, warm: bool = True,
                 force: bool = False, wall_s: float | None = None, course=None, template: Path | None = None,
                 queue: str | None = None, similar_threshold: float = similarity.THRESHOLD,
                 compare_with: Path | None = None, adjustments: term.Adjustments | None = None):
        """`queue`: a Redis URL whose workers grade the submissions (grader.queue) instead of
        this machine's own sandboxes; `course`: an instructor's points, visibility and limits
        (grader.course); `template`: starter code left out when comparing submissions."""
        self.folder, self.out, self.exercise, self.sandbox, self.queue = folder, out, exercise, sandbox, queue
        self.course, self.template = course, template
        self.released: tuple[str, ...] = course.released if course is not None else ()
        # pairs much alike from this share of fingerprints; an earlier term's folder compared, not graded
        self.similar_threshold = similarity.check_threshold(similar_threshold, "similar_threshold")
        self.compare_with = compare_with
        self.adjustments = adjustments   # applied to every report, never to a result (grader.term)
        wall_s = time_limit(exercise, wall_s, course)
        self.jobs, self.warm, self.force, self.wall_s = max(1, jobs), warm, force, wall_s
        self.fingerprint = exercises.get(exercise).fingerprint()
        # What the sandbox ran: another one regrades; what only scores: another one rescores.
        self.run_fingerprint = keys.run_fingerprint(exercise, sandbox, wall_s)
        self.score_fingerprint = keys.score_fingerprint(self.run_fingerprint, course)
        self.results_dir = out / "results"
        self.index_path = out / "index.json"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pool: Grader | None = None

    # --- planning ---------------------------------------------------------------------------

    def plan(self, handins: list[Handin]) -> tuple[list[Handin], dict, list[Handin]]:
        """Of the submissions, those to grade now; the index of what was graded before; and
        those whose stored run only needs scoring again (the course's weights changed)."""
        index = self._load_index()
        stale = [u for u in handins if self.force or not self._is_current(u, index.get(u.key))]
        rescore = [u for u in stale if not self.force and self._has_run(u, index.get(u.key))]
        return [u for u in stale if u not in rescore], index, rescore

    def _is_current(self, handin: Handin, entry: dict | None) -> bool:
        if not entry:
            return False
        return entry.get("key") == handin.grading_key(self.score_fingerprint) \
            and entry.get("status") != Status.ERROR.value and (self.out / entry.get("result_file", "")).is_file()

    def _has_run(self, handin: Handin, entry: dict | None) -> bool:
        if not entry:
            return False
        return entry.get("run_key") == handin.grading_key(self.run_fingerprint) \
            and entry.get("status") != Status.ERROR.value and (self.out / entry.get("run_file", "")).is_file()

    def _load_index(self) -> dict:
        try:
            data = json.loads(self.index_path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("schema") != INDEX_SCHEMA:
            return {}
        return {k: v for k, v in (data.get("submissions") or {}).items() if isinstance(v, dict)}

    def stored_clusters(self) -> set[str] | None:
        """The cluster ids of the results this output folder holds from before (ids come from the
        raw runs, so no course changes them); None when it holds no graded result to tell by."""
        found, graded = set(), False
        for entry in self._load_index().values():
            if entry.get("status") != Status.GRADED.value:
                continue
            try:
                result = json.loads((self.out / entry.get("result_file", "")).read_text())
            except (OSError, ValueError):
                continue
            graded = True
            if isinstance(result, dict) and isinstance(result.get("cluster"), str) and result["cluster"]:
                found.add(result["cluster"])
        return found if graded else None

    # --- running ----------------------------------------------------------------------------

    def run(self, handins: list[Handin] | None = None, on_start: Callable[[int, int], None] = lambda total, kept: None,
            on_done: Callable[[str, GradeResult], None] = lambda key, result: None) -> Outcome:
        """Grade what needs grading among `handins` (by default, what discover() finds); on
        KeyboardInterrupt, stop and keep what was recorded."""
        handins = discover(self.folder, self.exercise) if handins is None else handins
        started = time.monotonic()
        self.out.mkdir(mode=0o700, parents=True, exist_ok=True)  # new: the grader's alone (no grade's uid reads it)
        with open(self.out / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as err:
                raise BatchBusy(f"another `grade batch` is writing to {self.out}; wait for it or use "
                                "another --out") from err
            outcome = self._run_locked(handins, on_start, on_done)
            self._write_reports(outcome)
        outcome.duration_s = time.monotonic() - started
        return outcome

    def _run_locked(self, handins: list[Handin], on_start, on_done) -> Outcome:
        todo, index, rescore = self.plan(handins)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        rescored = []
        for handin in rescore:
            result = self._rescore(handin, index[handin.key])
            if result is None:
                todo.append(handin)  # its stored run cannot be read: graded again
            else:
                self._record(handin, result, index, run_kept=True)
                rescored.append(handin.key)
        changed = {u.key for u in todo} | set(rescored)
        outcome = Outcome(handins, kept=[u.key for u in handins if u.key not in changed], rescored=rescored,
                          rescore_s=time.monotonic() - started)
        on_start(len(todo), len(outcome.kept))
        pending: queue.Queue = queue.Queue()
        for handin in todo:
            pending.put(handin)
        if self.queue:  # imported only here: a batch without a queue needs neither Celery nor Redis
            from grader.queue import QueuePool
            pool: Grader = QueuePool(self.queue, todo, exercise=self.exercise, sandbox=self.sandbox,
                                               wall_s=self.wall_s, fresh=self.force)
        else:  # the class's other files and results stay out of the student's sight
            pool = Pool(self.sandbox, min(self.jobs, max(len(todo), 1)), warm=self.warm,
                        hidden=(str(self.folder.resolve()), str(self.out.resolve())))
        self._pool = pool
        threads = [threading.Thread(target=self._slot, args=(pending, index, outcome, on_done), daemon=True)
                   for _ in range(min(self.jobs, len(todo)))]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # short joins: Ctrl-C reaches this thread
        except KeyboardInterrupt:
            outcome.interrupted = True
            self._stop.set()
            pool.shutdown()  # ends the grades in flight; they are not recorded
            for thread in threads:
                thread.join(30)
        finally:
            pool.close()
            outcome.sandbox_starts = pool.starts
        outcome.rows = self._rows(handins, self._load_index())
        return outcome

    def _slot(self, pending: queue.Queue, index: dict, outcome: Outcome, on_done) -> None:
        while not self._stop.is_set():
            try:
                handin = pending.get_nowait()
            except queue.Empty:
                return
            try:
                result = self._grade(handin)
            except PoolClosed:
                return
            if self._stop.is_set():
                return  # interrupted mid-grade: this result is not trusted, and not recorded
            try:
                try:
                    self._record(handin, result, index)
                except (ValueError, TypeError) as err:  # a grader bug: that submission's error, not the slot's end
                    result = grading.error_result(self.folder / handin.key, f"internal error: the result could not "
                                                  f"be recorded ({type(err).__name__})", exercise=self.exercise,
                                                  sandbox=self.sandbox)
                    self._record(handin, result, index)
            except OSError as err:  # the output folder broke (disk full, removed): stop, keep the rest
                outcome.failure = f"cannot record a result in {self.out}: {err.strerror or err}"
                self._stop.set()
                return
            outcome.graded_now.append(handin.key)
            on_done(handin.key, result)

    def _grade(self, handin: Handin) -> GradeResult:
        """The handin's result; whatever goes wrong becomes a result of status error."""
        if handin.path is None:
            return grading.rejected_result(self.folder / handin.key, handin.rejection, exercise=self.exercise,
                                           sandbox=self.sandbox, course=self.course)
        assert self._pool is not None  # run() made it before any slot started
        try:
            return self._pool.grade(handin.path, exercise=self.exercise, wall_s=self.wall_s, course=self.course,
                                    data=handin.content)
        except PoolClosed:
            raise
        except Exception as err:  # noqa: BLE001  (a grader bug costs this submission its grade, not the batch)
            return grading.error_result(handin.path, f"internal error: {type(err).__name__}: {err}",
                                        exercise=self.exercise, sandbox=self.sandbox, course=self.course)

    def _rescore(self, handin: Handin, entry: dict) -> GradeResult | None:
        """The handin's result scored again from its stored run, under this batch's course; None
        when the run cannot be used (then it is graded again)."""
        try:
            run = json.loads((self.out / entry["run_file"]).read_text())
            if "rejected" in run:  # rejected before any sandbox ran
                return grading.rejected_result(self.folder / handin.key, str(run["rejected"]), exercise=self.exercise,
                                               sandbox=self.sandbox, course=self.course)
            if handin.path is None:  # nothing left to score again: graded (rejected) afresh
                return None
            return grading.rescore(handin.path, run["report"], exercise=self.exercise, sandbox=self.sandbox,
                                   duration_s=float(run.get("duration_s") or 0), course=self.course,
                                   submission=submissions.read(handin.path, compiles=False, data=handin.content))
        except (OSError, ValueError, KeyError, TypeError, SubmissionRejected):  # ReportError is a ValueError
            return None

    def _record(self, handin: Handin, result: GradeResult, index: dict, run_kept: bool = False) -> None:
        """Write the result, its run (unless `run_kept`: rescored from it) and its page, then the
        index that points to them: an interrupt never leaves an index entry without its files."""
        base = _safe_name(handin.key)
        name = f"results/{base}.json"
        classreport.write_atomic(self.out / name, formats.dumps(formats.to_format(result, "native")) + "\n")
        entry = {"key": handin.grading_key(self.score_fingerprint), "result_file": name, "status": result.status.value,
                 "graded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        run = ({"report": result.report, "duration_s": result.duration_s} if result.report is not None else
               {"rejected": result.message} if result.status is Status.REJECTED else None)
        if run is not None:
            if not run_kept:
                (self.out / "runs").mkdir(exist_ok=True)
                classreport.write_atomic(self.out / f"runs/{base}.json", json.dumps(run) + "\n")
            entry.update(run_key=handin.grading_key(self.run_fingerprint), run_file=f"runs/{base}.json")
        (self.out / "pages").mkdir(exist_ok=True)
        feedback_pages.write_page(result, self.out / f"pages/{base}.html", released=self.released)
        entry["page_file"] = f"pages/{base}.html"
        with self._lock:
            index[handin.key] = entry
            document = {"schema": INDEX_SCHEMA, "exercise": self.exercise, "fingerprint": self.fingerprint,
                        "submissions": dict(sorted(index.items()))}
            classreport.write_atomic(self.index_path, json.dumps(document, indent=1) + "\n")

    # --- reporting --------------------------------------------------------------------------

    def _rows(self, handins: list[Handin], index: dict) -> list[classreport.Row]:
        """A row for every submission now in the folder whose result was recorded under its current
        key: a submission changed since its last grade has no row until it is graded again."""
        rows = []
        shown = text.names(u.key for u in handins)  # names that read alike are told apart
        for handin in handins:
            entry = index.get(handin.key)
            if not entry or entry.get("key") != handin.grading_key(self.score_fingerprint):
                continue
            try:
                result = json.loads((self.out / entry["result_file"]).read_text())
            except (OSError, ValueError, KeyError):
                continue
            rows.append(classreport.Row(
                submission=shown[handin.key], key=handin.key, status=str(result.get("status")), score=result.get("score"),
                max_score=float(result.get("max_score") or 0), duration_s=float(result.get("duration_s") or 0),
                bug_ids=tuple(b.get("id", "") for b in result.get("bugs") or () if isinstance(b, dict)),
                result=result, result_file=entry["result_file"], page_file=entry.get("page_file", "")))
        return rows

    def _write_reports(self, outcome: Outcome) -> None:
        standings = self._standings(outcome)
        classreport.write_gradebook(outcome.rows, self.out / "gradebook.csv", standings)
        if standings is not None:
            self._write_term(outcome.rows, standings)
        outcome.standings = standings
        summary = classreport.summarize(outcome.rows, standings)
        graded = {row.key: row.submission for row in outcome.rows}
        outcome.similar = self._similar(outcome, graded)
        classreport.write_atomic(self.out / "similar.csv", _similar_csv(outcome.similar))
        classreport.write_atomic(self.out / "similar.json", similarity.to_json(outcome.similar))
        outcome.clusters, outcome.similar_pairs = behaviours.clusters(outcome.rows), len(outcome.similar.pairs)
        classpage.write_html(summary, outcome.rows, self.out / "report.html",
                               title=f"{self.exercise}: {self.folder.name}",
                               similar=outcome.similar,
                               clusters=outcome.clusters, released=self.released, code=self._class_code(outcome),
                               standings=standings)

    def _standings(self, outcome: Outcome) -> dict[str, term.Standing] | None:
        """Each row's grade with the late policy and the adjustments applied, by key; None when
        the batch has neither (the gradebook is then the grader's alone)."""
        late = self.course.late if self.course is not None else None
        if late is None and self.adjustments is None:
            return None
        paths = {u.key: u.path for u in outcome.handins}
        chosen = self.adjustments.by_student if self.adjustments is not None else {}
        return {row.key: term.standing(None if row.status == Status.ERROR.value else row.score, row.max_score,
                                       submitted=term.submitted_at(self.folder / row.key, paths.get(row.key)),
                                       late=late, adjustment=chosen.get(row.key))
                for row in outcome.rows}

    def _write_term(self, rows: list[classreport.Row], standings: dict[str, term.Standing]) -> None:
        """lms.csv, and the term's lines on the pages of the students it changes something for (and
        on those that showed some before: an adjustment taken back leaves the page as graded)."""
        lines, groups = [], {}
        for row in rows:
            try:
                result = GradeResult.from_dict(row.result or {})
            except (KeyError, ValueError, TypeError):
                continue
            by_group = {g.title: g.score for g in result.groups()}
            groups.update(dict.fromkeys(by_group))
            lines.append((Path(row.key).stem if not (self.folder / row.key).is_dir() else row.key,
                          standings[row.key], by_group))
            said = standings[row.key].lines()
            page = self.out / row.page_file if row.page_file else None
            if page is not None and (said or _has_term(page)):
                feedback_pages.write_page(result, page, released=self.released, term=said)
        classreport.write_atomic(self.out / "lms.csv", term.lms_csv(sorted(lines, key=lambda r: r[0]),
                                                                   assignment=f"{self.exercise} (final)",
                                                                   groups=list(groups)))

    def _class_code(self, outcome: Outcome) -> instructor_sections.ClassCode:
        """The graded submissions' code, by shown name, and which have full marks: what the
        clusters of the report are read against."""
        graded = {row.key: row.submission for row in outcome.rows if row.status == Status.GRADED.value}
        full = tuple(r.submission for r in outcome.rows if r.status == Status.GRADED.value
                     and r.score is not None and r.score >= r.max_score - 1e-9)
        return instructor_sections.ClassCode({graded[u.key]: instructor_sections.source_text(_script(u))
                                      for u in outcome.handins if u.path is not None and u.key in graded}, full)

    def _similar(self, outcome: Outcome, graded: dict[str, str]) -> similarity.Findings:
        """Pairs of graded submissions much alike, with each other, with an earlier term's
        (`compare_with`, not graded) and with the exercise's known sources."""
        files = [similarity.File(graded[u.key], _script(u), u.sha256)
                 for u in outcome.handins if u.path is not None and u.key in graded]
        if self.compare_with is not None:
            earlier = [u for u in discover(self.compare_with, self.exercise) if u.path is not None]
            shown = text.names(f"{self.compare_with.name}/{u.key}" for u in earlier)
            files += [similarity.File(shown[f"{self.compare_with.name}/{u.key}"], _script(u),
                                      u.sha256, origin=similarity.Origin.EARLIER) for u in earlier
                      if u.path is not None]
        exercise = exercises.get(self.exercise)
        files += similarity.known_sources(exercise.directory)
        starter = similarity.starter_code(exercise.statement, self.template)
        return similarity.find(files, starter, threshold=self.similar_threshold)


def _similar_csv(findings: similarity.Findings) -> str:
    """similar.csv, its names guarded as the gradebook's are (nothing a spreadsheet would run)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(similarity.CSV_HEADER)
    for row in similarity.csv_rows(findings):
        writer.writerow([text.spreadsheet_safe(row[0]), text.spreadsheet_safe(row[1]), *row[2:]])
    return out.getvalue()


def _has_term(page: Path) -> bool:
    try:
        return feedback_pages.TERM_MARK in page.read_text(encoding="utf-8")
    except OSError:
        return False


def _script(handin: Handin) -> bytes:
    """The Python of a submission (a notebook's code cells), for comparing classmates' code."""
    if handin.path is None:
        return b""
    try:
        return submissions.read(handin.path, compiles=False, data=handin.content).script
    except SubmissionRejected:
        return b""


def _safe_name(key: str) -> str:
    """A file name for a submission key: readable, and unique even where two keys read alike."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:80].strip("._") or "submission"
    return f"{readable}-{hashlib.sha256(os.fsencode(key)).hexdigest()[:8]}"
