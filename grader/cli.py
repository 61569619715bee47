"""The `grade` command line. It parses, calls one core function, and renders; nothing more."""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

import exercise as exercises
import sandbox.registry as registry
from sandbox.backend import SandboxUnavailable
from sandbox.phases import process_started
from grader import __version__, formats, grading, platforms, render, similarity, text
from grader.course import TIME_LIMIT_S, check_time_limit
from grader.errors import GraderError, SubmissionRejected
from grader.result import GradeResult, Status
from grader.result import points as readable_points

EXIT_RESULT, EXIT_GRADER_FAILED = 0, 1  # 2 (bad command line) is Click's own


class _DefaultToFile(click.Group):
    """`grade SUBMISSION ...` (or `grade --exercise NAME SUBMISSION ...`) means `grade file ...`;
    named commands, --help and --version work as usual."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help", "--version"):
            args = ["file", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx, formatter):
        formatter.write_usage("grade", "SUBMISSION [OPTIONS]  |  grade COMMAND [ARGS]...")


@click.group(cls=_DefaultToFile, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grade")
def main():
    """Grade PyTorch exercise submissions in a sandbox, with feedback that names the bug.

    \b
      grade submit.py                      grade one file (.py or .ipynb)
      grade submit.py --json result.json   also write the result as JSON ('-' for stdout)
      grade submit.py --format gradescope --json results.json   a platform's results file
      grade export gradescope autograder.zip                    a Gradescope autograder bundle
      grade batch submissions/ --out graded/ --jobs 4           regrade a class

    Exit status: 0 when a result was produced (whatever the score), 1 when the grader itself
    failed, 2 for a bad command line.
    """


def _exercise_option(f):
    return click.option("--exercise", "exercise_name", default=exercises.DEFAULT, show_default=True,
                        callback=_check_exercise, help="The exercise to grade against (see `grade exercises`).")(f)


def _sandbox_option(default: str = grading.DEFAULT_SANDBOX):
    return click.option("--sandbox", type=click.Choice(sorted(registry.available())), default=default,
                        show_default=True, help="Where the submission runs.")


def _weak_sandbox_option(f):
    return click.option("--allow-weak-sandbox", is_flag=True,
                        help="Grade in the local sandbox even where it lacks a guarantee it needs here "
                             "(named at start, and warned about on every start).")(f)


def _refuse_weak_sandbox(sandbox: str, *, allow: bool, serving: bool) -> None:
    """A command that grades many students' code refuses a sandbox that cannot be a boundary here,
    with one line naming what is missing; --allow-weak-sandbox grades anyway, said loudly."""
    weak = registry.get(sandbox).weaknesses(serving=serving)
    if not weak:
        return
    if not allow:
        raise click.ClickException(f"the {sandbox} sandbox is not a boundary here: {'; '.join(weak)}. Grade in "
                                   "--sandbox docker, or pass --allow-weak-sandbox to accept the risk")
    click.echo(f"WARNING: grading in a weak {sandbox} sandbox (--allow-weak-sandbox): {'; '.join(weak)}", err=True)


def _course_option(f):
    return click.option("--course", "course_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                        help="A course file (TOML): points, visibility and advice costs per test group, the "
                             "time limit, names of mistake clusters (see `grade exercises --groups`).")(f)


class BadInput(GraderError, click.ClickException):
    """A bad command line whose message says it all (a course file's line and key): one line of
    error, without Click's usage block, and exit status 2 as for any bad command line."""
    exit_code = 2


def _course(course_file: Path | None, exercise_name: str):
    """The course file read against the exercise; a bad one is a bad command line (exit 2)."""
    if course_file is None:
        return None
    from grader import course
    try:
        return course.load(course_file, exercises.get(exercise_name))
    except course.CourseError as err:
        raise BadInput(f"--course {err}") from err


def _time_limit_option(help: str):
    """--time-limit SECONDS: a finite number within the range a course file's time_limit_s has."""
    def check(ctx, param, value: str | None) -> float | None:
        if value is None:
            return None
        try:
            return check_time_limit(_number(value), "--time-limit")
        except ValueError as err:
            raise BadInput(str(err)) from err
    low, high = TIME_LIMIT_S
    return click.option("--time-limit", metavar="SECONDS", callback=check, help=help.format(range=f"{low:g} to {high:g}"))


def _number(text: str) -> float | str:
    """`text` as a float where it reads as one (check_time_limit then says what it must be)."""
    try:
        return float(text)
    except ValueError:
        return text


def _check_exercise(ctx, param, name: str) -> str:
    try:
        exercises.get(name)
    except exercises.UnknownExercise as err:
        raise click.BadParameter(str(err)) from err
    return name


def _secret_option(f):
    return click.option("--secret-file", type=click.Path(path_type=Path, dir_okay=False),
                        help="The queue's secret, shared by its workers and clients, which sign and check "
                             "every task and result with it (default: $GRADER_QUEUE_SECRET_FILE, else "
                             "$GRADER_QUEUE_SECRET).")(f)


def _queue_secret(secret_file: Path | None) -> None:
    """Sign and check this process's queue traffic with the secret; none is one line, before anything runs."""
    from grader import queue, signing
    try:
        queue.use_secret(secret_file)
    except signing.SecretMissing as err:
        raise click.ClickException(str(err)) from err


def _queued_sandbox(sandbox: str) -> str:
    """The sandbox a queued batch or service asks the workers for: the one given with --sandbox
    (a worker started with another refuses it), else whichever each worker was started with."""
    from grader import queue
    source = click.get_current_context().get_parameter_source("sandbox")
    return sandbox if source is not click.core.ParameterSource.DEFAULT else queue.ANY_SANDBOX


def _check_redis_url(ctx, param, url: str | None) -> str | None:
    if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
        raise click.BadParameter(f"{url!r} is not a Redis URL (redis://HOST:PORT/DB)")
    return url


@main.command("file")
@click.argument("submission", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "json_out", metavar="OUT", help="Write the result JSON to OUT ('-' for stdout).")
@click.option("--format", "fmt", type=click.Choice(formats.FORMATS), default="native", show_default=True,
              help="The layout of the --json file: the native result, or a platform's results.json.")
@_sandbox_option()
@_exercise_option
@_time_limit_option("Wall-clock limit for the whole grade, {range} (default: the exercise's own).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on the terminal.")
@click.option("--profile", is_flag=True, help="Also print where the grade's time went, phase by phase.")
@_course_option
def grade_one(submission: Path, json_out: str | None, fmt: str, sandbox: str, exercise_name: str,
              time_limit: float | None, quiet: bool, profile: bool, course_file: Path | None):
    """Grade one SUBMISSION (.py or .ipynb) and print the feedback."""
    if fmt != "native" and not json_out:
        raise click.BadParameter(f"--format {fmt} describes the --json file: add --json OUT", param_hint="--format")
    try:
        if not submission.exists():
            raise click.BadParameter(f"{submission} does not exist", param_hint="SUBMISSION")
    except OSError as err:  # a folder on the way this user may not enter
        raise click.BadParameter(f"{submission} cannot be read: {err.strerror}", param_hint="SUBMISSION") from err
    course = _course(course_file, exercise_name)
    # With JSON on stdout, the readable feedback moves to stderr so the JSON stays parseable.
    console = Console(stderr=json_out == "-", highlight=False)
    try:
        backend = registry.get(sandbox)
        backend.check()  # a sandbox that cannot run here is one message, not a result
    except SandboxUnavailable as err:
        raise click.ClickException(str(err)) from err
    if not quiet:
        for weakness in backend.weaknesses():  # one's own file on one's own laptop: a note, not a refusal
            click.echo(f"Note: the {sandbox} sandbox is weaker here: {weakness}", err=True)
    result = _with_start(_grade(submission, exercise_name, sandbox, time_limit, console if not quiet else None,
                                course), time.monotonic())
    if not quiet:
        console.print(render.build(result))
    if profile:
        Console(stderr=True, highlight=False).print(render.profile(result))
    if json_out:
        _write(formats.dumps(formats.to_format(result, fmt)), json_out)
    sys.exit(EXIT_GRADER_FAILED if result.status is Status.ERROR else EXIT_RESULT)


def _with_start(result: GradeResult, graded_at: float) -> GradeResult:
    """The result's phases from this process's start: its Python start and imports come first."""
    started = process_started()
    if started is None or not result.phases:
        return result
    lead = max(0.0, graded_at - max(end for _, _, end in result.phases) - started)
    phases = (("host: Python start and imports", 0.0, lead),
              *((name, a + lead, b + lead) for name, a, b in result.phases))
    return dataclasses.replace(result, phases=phases)


def _grade(path: Path, exercise_name: str, sandbox: str, time_limit: float | None,
           console: Console | None, course=None) -> GradeResult:
    """Grade one file; a grader fault becomes an error result (grading.grade), its log shown on `console`."""
    def show(log: str) -> None:
        if console is not None:
            console.print(Text(text.safe(log[-2000:]), style="dim"))
    return grading.grade(path, exercise=exercise_name, sandbox=sandbox, wall_s=time_limit, on_log=show,
                         course=course)


@main.command("batch")
@click.argument("folder", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="Where the results, gradebook.csv and report.html go (made if missing).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=max(1, (os.cpu_count() or 1)), show_default="cores",
              help="How many submissions are graded at once.")
@_sandbox_option()
@_exercise_option
@click.option("--force", is_flag=True, help="Regrade everything, even submissions already graded under the same key.")
@click.option("--cold", is_flag=True,
              help="A fresh sandbox and a cold start per submission, as `grade FILE` does (slower; for comparison).")
@_time_limit_option("Wall-clock limit per submission, {range} (default: the course's, else the exercise's own).")
@click.option("--queue", "queue_url", metavar="redis://HOST:PORT/DB", callback=_check_redis_url,
              help="Send the submissions to the `grade worker`s of this Redis instead of grading them here.")
@_secret_option
@_course_option
@click.option("--template", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Starter code handed to the students: left out when comparing submissions.")
@click.option("--similar-threshold", metavar="SHARE", default=str(similarity.THRESHOLD), show_default=True,
              callback=lambda ctx, param, value: _similar_threshold(value),
              help="Show two submissions as much alike from this share (0 to 1) of their code's fingerprints "
                   "in common; every pair found goes to OUT/similar.csv and OUT/similar.json.")
@click.option("--compare-with", type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="An earlier term's submissions (a folder like FOLDER): pairs with them are shown, they are not graded.")
@click.option("--adjustments", "adjustments_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="A TOML file of per-student points (+/-), notes and extension_days, by the submission's name "
                   "in FOLDER: applied to gradebook.csv, the pages and OUT/lms.csv on every run, never to a result.")
@_weak_sandbox_option
def grade_batch(folder: Path, out: Path, jobs: int, sandbox: str, exercise_name: str, force: bool, cold: bool,
                time_limit: float | None, queue_url: str | None, secret_file: Path | None, course_file: Path | None,
                template: Path | None, similar_threshold: float, compare_with: Path | None,
                adjustments_file: Path | None, allow_weak_sandbox: bool):
    """Grade every submission in FOLDER: each .py or .ipynb in it, and each sub-folder (a folder per
    student, where the file that defines the exercise's class is graded).

    \b
    Writes OUT/results/*.json, OUT/pages/*.html, OUT/gradebook.csv and OUT/report.html, and prints
    a summary. A rerun grades only new or changed submissions (by content, exercise version, tests and
    points, sandbox and time limit) unless --force; one whose course changed only points,
    visibility, advice or cluster names is rescored from its stored run, without a sandbox. Ctrl-C stops and keeps what was graded; run again to finish.
    Exit status: 0 when every submission has a result, 1 when the grader failed on any (their
    rows say status error; rerun to retry them), 130 when interrupted.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from grader import batch as batches
    from grader import classreport
    console = Console(highlight=False)
    if queue_url and cold:
        raise click.BadParameter("the queue's workers grade in warm sandboxes: leave out --cold", param_hint="--cold")
    if queue_url and course_file:
        raise click.BadParameter("a course file is applied by a batch graded here; the queue's workers score "
                                 "with the exercise's own points (not supported yet): leave out --queue or --course",
                                 param_hint="--course")
    if queue_url:  # with a queue, the sandbox is the workers' operator's business
        _queue_secret(secret_file)
        sandbox = _queued_sandbox(sandbox)
    else:
        try:
            registry.get(sandbox).check()  # before any grade: a sandbox that cannot run here is one message
        except SandboxUnavailable as err:
            raise click.ClickException(str(err)) from err
        _refuse_weak_sandbox(sandbox, allow=allow_weak_sandbox, serving=False)
    if compare_with is not None and compare_with.resolve() == folder.resolve():
        raise BadInput(f"--compare-with {compare_with} is the folder being graded: give an earlier term's folder")
    course = _course(course_file, exercise_name)
    handins = batches.discover(folder, exercise_name)
    if not handins:
        raise click.ClickException(f"no submissions in {folder}: it has no .py or .ipynb file and no sub-folder")
    adjustments = None
    if adjustments_file is not None:
        from grader import term
        try:
            adjustments = term.load_adjustments(adjustments_file, [u.key for u in handins])
        except term.AdjustmentsError as err:
            raise BadInput(f"--adjustments {err}") from err
    job = batches.Batch(folder, out, exercise=exercise_name, sandbox=sandbox, jobs=jobs, warm=not cold,
                        force=force, wall_s=time_limit, queue=queue_url, course=course, template=template,
                        similar_threshold=similar_threshold, compare_with=compare_with, adjustments=adjustments)
    names_clusters = course is not None and bool(course.clusters)
    known = job.stored_clusters() if names_clusters else None
    if known is not None:  # the clusters of the class graded before: a course names only those
        _check_clusters(course, known)
    unreachable: tuple = ()
    if queue_url:
        from grader.queue import QueueUnavailable
        unreachable = (QueueUnavailable, ValueError)
    counts = {status.value: 0 for status in Status}
    progress = Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console,
                        transient=False)
    task = progress.add_task("", total=None)

    def started(total: int, kept: int) -> None:
        progress.update(task, total=total)
        if kept:
            console.print(f"{kept} submission(s) already graded under the same key: kept (--force regrades them)")

    def done(key: str, result: GradeResult) -> None:
        counts[result.status.value] += 1
        progress.update(task, advance=1, description=" · ".join(f"{n} {s}" for s, n in counts.items() if n))

    try:
        with progress:
            outcome = job.run(handins, on_start=started, on_done=done)
    except (batches.BatchBusy, *unreachable) as err:
        raise click.ClickException(str(err)) from err
    except OSError as err:
        raise click.ClickException(f"cannot write to {out}: {err.strerror or err}") from err
    if names_clusters and known is None and not outcome.interrupted:
        # The first run of a class: its clusters are known only now. The grades stay recorded (a
        # corrected course rescores them without a sandbox), but a name given to no cluster is refused.
        _check_clusters(course, job.stored_clusters() or set(), after_grading=True)
    if outcome.rescored:
        console.print(f"rescored {len(outcome.rescored):,} from stored runs in {outcome.rescore_s:.1f} s")
    classreport.print_summary(classreport.summarize(outcome.rows, outcome.standings), console,
                              clusters=outcome.clusters, similar=outcome.similar_pairs, released=job.released)
    starts = (f" · {outcome.sandbox_starts} warm sandbox{'es' if outcome.sandbox_starts != 1 else ''} started"
              if not cold and not queue_url and outcome.graded_now else " · by the queue's workers" if queue_url else "")
    console.print(f"graded {len(outcome.graded_now)}, kept {len(outcome.kept)} · {outcome.duration_s:.1f} s"
                  f"{starts}", soft_wrap=True)
    lms = f", {out / 'lms.csv'}" if (out / "lms.csv").is_file() and (adjustments is not None or
                                                                   (course is not None and course.late)) else ""
    console.print(f"wrote {out / 'gradebook.csv'}{lms} and {out / 'report.html'}", soft_wrap=True)
    if outcome.similar is not None:
        _similar_notice(outcome.similar, out, console)
    missing = len(outcome.handins) - len(outcome.rows)  # no result under the current key
    if outcome.interrupted:
        console.print(f"[yellow]interrupted[/]: {missing} submission(s) not graded yet; run the same command again "
                      "to grade only those")
        sys.exit(130)
    if outcome.failure:
        raise click.ClickException(f"{outcome.failure}; the results recorded before are kept")
    sys.exit(EXIT_GRADER_FAILED if outcome.errors or missing else EXIT_RESULT)


def _check_clusters(course, known: set[str], *, after_grading: bool = False) -> None:
    """A course's [clusters.ID] must name a cluster of the class (`known`); else exit 2, the valid ids listed."""
    from grader.course import CourseError
    try:
        course.check_clusters(known)
    except CourseError as err:
        kept = (" (the grades are recorded: fix the id and run again to rescore them, no sandbox)"
                if after_grading else "")
        raise BadInput(f"--course {err}{kept}") from err


def _similar_threshold(value: str) -> float:
    from grader.similarity import BadThreshold
    try:
        return similarity.check_threshold(value)
    except BadThreshold as err:
        raise BadInput(str(err)) from err


def _similar_notice(findings, out: Path, console: Console) -> None:
    """Below the summary's count of similar pairs: the ones copied from a library's source, and a
    notice when the report shows only the most alike (similar.csv has every pair)."""
    known = sum(p.origin is similarity.Origin.KNOWN for p in findings.pairs)
    if known:
        console.print(f"[yellow]{known} submission(s) copied from a library's source[/] (from "
                      f"{findings.threshold:.0%} of their code): {out / 'similar.csv'}", soft_wrap=True)
    if findings.cut():
        console.print(f"[yellow]the report shows the {similarity.MAX_PAIRS} most alike similar pairs[/]: "
                      f"{findings.cut()} more pair(s) are only in {out / 'similar.csv'}", soft_wrap=True)


@main.command("worker")
@click.option("--broker", required=True, metavar="redis://HOST:PORT/DB", callback=_check_redis_url,
              envvar="GRADER_BROKER", show_envvar=True,
              help="The Redis that holds the queue and the results (given in GRADER_BROKER, its password "
                   "stays off the command line).")
@click.option("--slots", type=click.IntRange(min=1), default=1, show_default=True,
              help="Submissions graded at once: one warm sandbox (and worker process) each.")
@_sandbox_option()
@click.option("--queues", "lanes", default="interactive,regrade", show_default=True,
              help="The lanes to take tasks from, the first first.")
@click.option("--name", metavar="NAME@HOST",
              help="The worker's name, one per worker and the same across its restarts (default: grade@host).")
@_secret_option
@_weak_sandbox_option
def grade_worker(broker: str, slots: int, sandbox: str, lanes: str, name: str | None, secret_file: Path | None,
                 allow_weak_sandbox: bool):
    """Grade submissions sent to BROKER (by `grade batch --queue`, or grader.queue.submit) until
    stopped: one log line per grade, each in the sandbox given here (a task that asks for another
    is refused with an error result). SIGTERM lets the grades in flight finish first."""
    from grader import queue as queues
    chosen = [lane.strip() for lane in lanes.split(",") if lane.strip()]
    unknown = [lane for lane in chosen if lane not in queues.LANES]
    if unknown or not chosen:
        raise click.BadParameter(f"unknown lane(s) {', '.join(unknown) or '(none given)'}; the lanes are "
                                 f"{', '.join(queues.LANES)}", param_hint="--queues")
    _queue_secret(secret_file)
    try:
        queues.check_worker()
    except queues.WorkerRefused as err:
        raise click.ClickException(str(err)) from err
    _refuse_weak_sandbox(sandbox, allow=allow_weak_sandbox, serving=True)  # the last word before it starts
    queues.run_worker(broker, slots=slots, sandbox=sandbox, lanes=chosen, name=name)


@main.group("platform")
def platform_group():
    """Entry points that course platforms run: grade the upload where the platform puts it and
    write its results file there. Exit status 1 means the grader failed (no score recorded)."""


@platform_group.command("gradescope")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), default=platforms.GRADESCOPE_ROOT,
              show_default=True, help="Gradescope's folder: grades ROOT/submission into ROOT/results/results.json.")
@_sandbox_option()
@_exercise_option
@_course_option
def gradescope_entry(root: Path, sandbox: str, exercise_name: str, course_file: Path | None):
    """What `run_autograder` runs on Gradescope."""
    _platform_run(platforms.GRADESCOPE, root, sandbox, exercise_name, _course(course_file, exercise_name))


@platform_group.command("prairielearn")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), default=platforms.PRAIRIELEARN_ROOT,
              show_default=True, help="PrairieLearn's folder: grades ROOT/student into ROOT/results/results.json.")
@_sandbox_option(registry.platform_default())
@_exercise_option
@_course_option
def prairielearn_entry(root: Path, sandbox: str, exercise_name: str, course_file: Path | None):
    """What the grader image runs as PrairieLearn's external grader."""
    _platform_run(platforms.PRAIRIELEARN, root, sandbox, exercise_name, _course(course_file, exercise_name))


def _platform_run(platform: platforms.Platform, root: Path, sandbox: str, exercise_name: str, course=None) -> None:
    folder = root / platform.submission_dir
    console = Console(highlight=False)  # the platform keeps stdout for instructors
    try:
        path = grading.find_submission(folder, exercise=exercise_name)
    except SubmissionRejected as rejected:
        result = grading.rejected_result(folder, rejected.message, exercise=exercise_name, sandbox=sandbox,
                                         course=course)
    else:
        result = _grade(path, exercise_name, sandbox, None, console, course)  # an unusable sandbox: an error result
    console.print(render.build(result))
    target = root / platform.results_file
    document = formats.to_format(result, platform.format)
    if platform is platforms.GRADESCOPE and course is not None and course.late is not None:
        _late_on_gradescope(document, result, root, course.late, console)
    elif course is not None and course.late is not None:
        # PrairieLearn's grading job (/grade/data/data.json, the files in /grade/student) carries no
        # submission time: the files are written when the job is built. Said, for the instructor.
        console.print(f"The course's [late] is not applied on {platform.name}: its grading job says nothing of "
                      "when the student submitted (set the credit by date in the assessment's access rules).",
                      markup=False)
    try:
        platforms.write_results(target, formats.dumps(document))
    except OSError as err:
        raise click.FileError(str(target), err.strerror) from err
    console.print(f"wrote {target}")
    sys.exit(EXIT_GRADER_FAILED if result.status is Status.ERROR else EXIT_RESULT)


def _late_on_gradescope(document: dict, result: GradeResult, root: Path, late, console: Console) -> None:
    """The course's late policy on a Gradescope results.json, from the submission's `created_at` in
    ROOT/submission_metadata.json: the score less the penalty (Gradescope takes `score` over the
    tests' sum), said in the output. Without the metadata (or a score), nothing changes."""
    from grader import term
    if "score" not in document or result.score is None:
        return
    standing = term.standing(result.score, result.max_score, submitted=term.platform_time(root), late=late,
                             adjustment=None)
    if not standing.late_days:
        return
    final = standing.final
    assert final is not None  # the score is not None
    said = (f"Submitted {standing.late_days} day(s) late: {readable_points(standing.penalty)} points off; "
            f"score {readable_points(final)} / {readable_points(result.max_score)}.")
    document["score"] = round(final, 4)
    document["output"] = f"{said}\n\n{document.get('output', '')}"
    console.print(said)


@main.group("export")
def export_group():
    """Bundles that install the grader on a course platform."""


@export_group.command("gradescope")
@click.argument("out", type=click.Path(path_type=Path, dir_okay=False))
@_exercise_option
@_course_option
def export_gradescope(out: Path, exercise_name: str, course_file: Path | None):
    """Write OUT (.zip), a Gradescope autograder: setup.sh installs the grader, run_autograder
    grades /autograder/submission into /autograder/results/results.json (with --course, under
    that course file, which the bundle carries)."""
    _course(course_file, exercise_name)  # checked here, not on Gradescope
    try:
        files = platforms.gradescope_bundle(out, exercise_name, course=course_file)
    except platforms.ExportError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"wrote {out} ({files} files): upload it as the assignment's autograder on Gradescope")


def _database_option(command):
    return click.option("--database", "database", metavar="URL", envvar="GRADER_DATABASE_URL",
                        help="The service's database instead of --store's SQLite file, e.g. "
                             "postgresql+psycopg://USER:PASSWORD@HOST/DB (also $GRADER_DATABASE_URL).")(command)


@main.command("requests")
@click.option("--store", "store_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="The folder `grade serve --store` keeps its grades in.")
@_database_option
@click.option("--json", "as_json", is_flag=True, help="Print the requests as JSON lines instead of a table.")
def list_requests(store_dir: Path | None, database: str | None, as_json: bool):
    """The regrade requests students sent (from the student page or POST /v1/grades/ID/regrade-requests),
    oldest first: when, the file, its score when asked, the grade's id and the reason."""
    import dataclasses
    import datetime
    import json

    from rich.markup import escape
    from rich.table import Table

    from grader.result import out_of
    from grader.service.store import BadDatabase, load_requests
    if store_dir is None and not database:
        raise click.UsageError("say where the service keeps its grades: --store DIR or --database URL")
    try:
        found = load_requests(store_dir, database)
    except BadDatabase as err:
        raise click.ClickException(str(err)) from err
    if as_json:
        for request in found:
            click.echo(json.dumps(dataclasses.asdict(request)))
        return
    console = Console(highlight=False)
    if not found:
        console.print(f"no regrade requests in {store_dir or 'the database'}")
        return
    table = Table("asked (UTC)", "submission", "score", "grade id", "reason", title="Regrade requests")
    for r in found:
        when = datetime.datetime.fromtimestamp(r.created, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M")
        score = r.status if r.score is None else out_of(float(r.score), r.max_score)
        table.add_row(when, escape(r.name), score, r.grade_id, escape(r.reason))
    console.print(table)


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--queue", "broker", metavar="redis://HOST:PORT/DB", callback=_check_redis_url,
              help="Hand uploads to the queue's workers (`grade worker`) instead of grading here.")
@click.option("--tokens", "tokens_file", type=click.Path(path_type=Path, dir_okay=False),
              help="The API's tokens (made by `grade token new`); without it the API answers 401 to all.")
@click.option("--slots", type=click.IntRange(min=1), default=max(1, (os.cpu_count() or 1)), show_default="cores",
              help="Warm sandboxes grading at once (without --queue).")
@_sandbox_option()
@click.option("--store", "store_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Keep grades, results, uploads in flight and callbacks in an SQLite file in this "
                   "folder, across restarts (default: in memory).")
@_database_option
@click.option("--callback-backoff", metavar="S,S,...", default="1,2,4,8,16", show_default=True,
              envvar="GRADER_CALLBACK_BACKOFF_S",
              help="Seconds to wait before each retry of a callback that failed; then it is given up.")
@click.option("--callback-allow", metavar="NET,...", default="", envvar="GRADER_CALLBACK_ALLOW",
              help="Networks (10.0.0.0/8) or addresses callbacks may also reach; without it, only public "
                   "addresses (never loopback, private or link-local ones).")
@click.option("--trusted-proxy", "trusted_proxies", metavar="ADDR,...", default="", envvar="GRADER_TRUSTED_PROXIES",
              help="The reverse proxies whose X-Forwarded-For names the client (for the page's per-address "
                   "limit); without it, proxy headers are ignored and the connection's address counts.")
@click.option("--no-page", is_flag=True, help="No student page: only the API and /healthz.")
@click.option("--rate-limit", type=click.FloatRange(min=1), default=600, show_default=True, metavar="N",
              help="API requests a minute per token (and a burst of N).")
@click.option("--page-rate-limit", type=click.FloatRange(min=1), default=10, show_default=True, metavar="N",
              help="Uploads a minute per address on the student page.")
@_secret_option
@_weak_sandbox_option
def serve(host: str, port: int, broker: str | None, tokens_file: Path | None, slots: int, sandbox: str,
          store_dir: Path | None, database: str | None, callback_backoff: str, callback_allow: str,
          trusted_proxies: str, no_page: bool, rate_limit: float, page_rate_limit: float, secret_file: Path | None,
          allow_weak_sandbox: bool):
    """The HTTP service: API v1 (POST /v1/grades, GET /v1/grades/ID, POST /v1/grades/ID/regrade-requests;
    OpenAPI at /docs), /healthz, and the student page at / (unless --no-page). With --store or
    --database, a restart keeps every grade (one in flight is graded after it, its callback sent),
    and the regrade requests are kept for `grade requests`."""
    try:
        backoff = tuple(float(part) for part in callback_backoff.split(",") if part.strip())
    except ValueError:
        backoff = (-1.0,)
    if any(not 0 <= pause <= 3600 for pause in backoff):
        raise click.BadParameter("a comma-separated list of seconds, each 0 to 3600", param_hint="--callback-backoff")

    from grader.service import app as service, callbacks, engines
    from grader.service.tokens import TokenFileError, Tokens
    try:
        policy = callbacks.CallbackPolicy(callbacks.allowed_networks(callback_allow))
        proxies = [str(net) for net in callbacks.allowed_networks(trusted_proxies)]
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--callback-allow or --trusted-proxy") from err
    try:
        tokens = Tokens.load(tokens_file) if tokens_file else None
    except TokenFileError as err:
        raise click.ClickException(str(err)) from err
    if broker:
        from grader import queue as queues
        _queue_secret(secret_file)
        sandbox = _queued_sandbox(sandbox)
        _check_queue_answers(broker)
    else:  # with a queue, the workers' operator decides their sandbox
        _refuse_weak_sandbox(sandbox, allow=allow_weak_sandbox, serving=True)
    # The tokens and the store are the service's: no submission graded here may read them.
    from grader.service.store import database_file
    private = tuple(str(p.resolve()) for p in (tokens_file, store_dir, database_file(database)) if p is not None)
    engine = (engines.Queued(broker=broker, sandbox=sandbox) if broker
              else engines.Embedded(slots=slots, sandbox=sandbox, hidden=private))
    settings = service.Settings(engine=engine, tokens=tokens, store_dir=store_dir, database_url=database,
                                page=not no_page, callback_backoff_s=backoff, callback_policy=policy,
                                rate_per_minute=rate_limit, page_uploads_per_minute=page_rate_limit, sandbox=sandbox)
    from grader.service.store import BadDatabase
    try:
        app = service.create_app(settings)
    except BadDatabase as err:
        engine.close()
        raise click.ClickException(str(err)) from err
    how = f"queue {queues.shown(broker)}" if broker else f"{slots} warm {sandbox} slot{'s' if slots != 1 else ''}"
    click.echo(f"grade serve on http://{host}:{port} · {how} · {len(tokens) if tokens else 'no'} API token(s)"
               f"{'' if no_page else ' · student page at /'}", err=True)
    from grader.service import server
    server.run(app, host=host, port=port, trusted_proxies=proxies)


def _check_queue_answers(broker: str) -> None:
    """Refuse to start, in one line, on a queue whose Redis does not answer now."""
    import redis
    from grader import queue as queues
    try:
        queues.workers_seen(broker, timeout=5)
    except (redis.RedisError, OSError, ValueError) as err:
        raise click.ClickException(f"the queue {queues.shown(broker)} does not answer ({err}): start its Redis, "
                                   "or check --queue") from err


@main.group("token")
def token_group():
    """API tokens for `grade serve`."""


@token_group.command("new")
@click.argument("name")
@click.option("--tokens", "tokens_file", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The tokens file (made if missing; readable by its owner only).")
def token_new(name: str, tokens_file: Path):
    """Make a token named NAME and print it, once, with the secret its callbacks are signed with
    (HMAC-SHA256 of the body, header X-Grader-Signature: sha256=HEX). The file keeps only the
    token's salted hash."""
    from grader.service import tokens
    try:
        bearer, record = tokens.new(tokens_file, name)
    except tokens.TokenFileError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"token {bearer}")
    click.echo(f"signing_secret {record.signing_secret}")
    click.echo(f"made token {record.id} ({text.safe(name, one_line=True)}) in {tokens_file}: keep the token now, "
               "it is not stored", err=True)


_existing_tokens_file = click.option("--tokens", "tokens_file", required=True, help="The tokens file.",
                                     type=click.Path(path_type=Path, dir_okay=False, exists=True))


@token_group.command("revoke")
@click.argument("token_id", metavar="ID")
@_existing_tokens_file
def token_revoke(token_id: str, tokens_file: Path):
    """Remove the token whose id (gt_..., the part before the dot) is ID. A running `grade serve`
    refuses it from its next request; its grades stay in the database."""
    from grader.service import tokens
    try:
        record = tokens.revoke(tokens_file, token_id.partition(".")[0])
    except tokens.TokenFileError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"revoked token {record.id} ({text.safe(record.name, one_line=True)}) in {tokens_file}", err=True)


@token_group.command("list")
@_existing_tokens_file
def token_list(tokens_file: Path):
    """The tokens in the file: id, name, when made (never the token: the file has only its hash)."""
    from grader.service import tokens
    try:
        found = tokens.listed(tokens_file)
    except tokens.TokenFileError as err:
        raise click.ClickException(str(err)) from err
    for record in found:
        click.echo(f"{record.id}\t{text.safe(record.name, one_line=True)}\t{record.created}")


@main.command("exercises")
@click.option("--groups", "groups_of", metavar="NAME", callback=lambda ctx, p, v: v and _check_exercise(ctx, p, v),
              help="List exercise NAME's test groups with their default points: what a course file sets.")
def list_exercises(groups_of: str | None):
    """List the exercises this grader knows."""
    if groups_of:
        from grader.course import test_groups
        for group in test_groups(exercises.get(groups_of)).values():
            click.echo(f"{group.name}\t{group.points:g} points\t{group.visibility}\t{group.title}")
        return
    for name, ex in sorted(exercises.all_exercises().items()):
        click.echo(f"{name}\t{ex.title} (version {ex.version})")


def _write(document: str, out: str) -> None:
    if out == "-":
        click.echo(document)
        return
    try:
        Path(out).write_text(document + "\n", encoding="utf-8")
    except OSError as err:
        raise click.FileError(out, err.strerror) from err
