"""The `grade` command line. It parses, calls one core function, and renders; nothing more."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

import exercise as exercises
import sandbox.backend as backends
from grader import __version__, formats, grading, platforms, render, text
from grader.errors import SandboxFailure, SubmissionRejected
from grader.result import GradeResult, Status

EXIT_RESULT, EXIT_GRADER_FAILED = 0, 1  # 2 (bad command line) is Click's own


class _DefaultToFile(click.Group):
    """`grade SUBMISSION ...` means `grade file SUBMISSION ...`; named commands work as usual."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
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
    return click.option("--sandbox", type=click.Choice(sorted(backends.available())), default=default,
                        show_default=True, help="Where the submission runs.")


def _course_option(f):
    return click.option("--course", "course_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                        help="A course file (TOML): points, visibility and advice costs per test group, the "
                             "time limit, names of mistake clusters (see `grade exercises --groups`).")(f)


def _course(course_file: Path | None, exercise_name: str):
    """The course file read against the exercise; a bad one is a bad command line (exit 2)."""
    if course_file is None:
        return None
    from grader import course
    try:
        return course.load(course_file, exercises.get(exercise_name))
    except course.CourseError as err:
        raise click.BadParameter(str(err), param_hint="--course") from err


def _check_exercise(ctx, param, name: str) -> str:
    try:
        exercises.get(name)
    except exercises.UnknownExercise as err:
        raise click.BadParameter(str(err)) from err
    return name


@main.command("file")
@click.argument("submission", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "json_out", metavar="OUT", help="Write the result JSON to OUT ('-' for stdout).")
@click.option("--format", "fmt", type=click.Choice(formats.FORMATS), default="native", show_default=True,
              help="The layout of the --json file: the native result, or a platform's results.json.")
@_sandbox_option()
@_exercise_option
@click.option("--time-limit", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Wall-clock limit for the whole grade (default: the exercise's own).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on the terminal.")
@_course_option
def grade_one(submission: Path, json_out: str | None, fmt: str, sandbox: str, exercise_name: str,
              time_limit: float | None, quiet: bool, course_file: Path | None):
    """Grade one SUBMISSION (.py or .ipynb) and print the feedback."""
    if fmt != "native" and not json_out:
        raise click.BadParameter(f"--format {fmt} describes the --json file: add --json OUT", param_hint="--format")
    if not submission.exists():
        raise click.BadParameter(f"{submission} does not exist", param_hint="SUBMISSION")
    course = _course(course_file, exercise_name)
    # With JSON on stdout, the readable feedback moves to stderr so the JSON stays parseable.
    console = Console(stderr=json_out == "-", highlight=False)
    try:
        result = _grade(submission, exercise_name, sandbox, time_limit, console if not quiet else None, course)
    except backends.SandboxUnavailable as err:
        raise click.ClickException(str(err)) from err
    if not quiet:
        console.print(render.build(result))
    if json_out:
        _write(formats.dumps(formats.to_format(result, fmt)), json_out)
    sys.exit(EXIT_GRADER_FAILED if result.status is Status.ERROR else EXIT_RESULT)


def _grade(path: Path, exercise_name: str, sandbox: str, time_limit: float | None,
           console: Console | None, course=None) -> GradeResult:
    """Grade one file; a grader fault becomes an error result (its log shown on `console`)."""
    try:
        return grading.grade_file(path, exercise=exercise_name, sandbox=sandbox, wall_s=time_limit, course=course)
    except SandboxFailure as failure:
        if failure.log and console is not None:
            console.print(Text(text.safe(failure.log[-2000:]), style="dim"))
        return grading.error_result(path, failure.message, exercise=exercise_name, sandbox=sandbox, course=course)


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
@click.option("--time-limit", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Wall-clock limit per submission (default: the course's, else the exercise's own).")
@_course_option
@click.option("--template", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Starter code handed to the students: left out when comparing submissions.")
def grade_batch(folder: Path, out: Path, jobs: int, sandbox: str, exercise_name: str, force: bool, cold: bool,
                time_limit: float | None, course_file: Path | None, template: Path | None):
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
    if sandbox == "docker":
        try:
            backends.get("docker").client()
        except backends.SandboxUnavailable as err:
            raise click.ClickException(str(err)) from err
    course = _course(course_file, exercise_name)
    units = batches.discover(folder, exercise_name)
    if not units:
        raise click.ClickException(f"no submissions in {folder}: it has no .py or .ipynb file and no sub-folder")
    job = batches.Batch(folder, out, exercise=exercise_name, sandbox=sandbox, jobs=jobs, warm=not cold,
                        force=force, wall_s=time_limit, course=course, template=template)
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
            outcome = job.run(units, on_start=started, on_done=done)
    except batches.BatchBusy as err:
        raise click.ClickException(str(err)) from err
    except OSError as err:
        raise click.ClickException(f"cannot write to {out}: {err.strerror or err}") from err
    if outcome.rescored:
        console.print(f"rescored {len(outcome.rescored):,} from stored runs in {outcome.rescore_s:.1f} s")
    classreport.print_summary(classreport.summarize(outcome.rows), console)
    starts = (f" · {outcome.sandbox_starts} warm sandbox{'es' if outcome.sandbox_starts != 1 else ''} started"
              if not cold and outcome.graded_now else "")
    console.print(f"graded {len(outcome.graded_now)}, kept {len(outcome.kept)} · {outcome.duration_s:.1f} s"
                  f"{starts}", soft_wrap=True)
    console.print(f"wrote {out / 'gradebook.csv'} and {out / 'report.html'}", soft_wrap=True)
    missing = len(outcome.units) - len(outcome.rows)  # no result under the current key
    if outcome.interrupted:
        console.print(f"[yellow]interrupted[/]: {missing} submission(s) not graded yet; run the same command again "
                      "to grade only those")
        sys.exit(130)
    if outcome.failure:
        raise click.ClickException(f"{outcome.failure}; the results recorded before are kept")
    sys.exit(EXIT_GRADER_FAILED if outcome.errors or missing else EXIT_RESULT)


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
@_sandbox_option("image" if "image" in backends.available() else grading.DEFAULT_SANDBOX)
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
        try:
            result = _grade(path, exercise_name, sandbox, None, console, course)
        except backends.SandboxUnavailable as err:
            result = grading.error_result(path, str(err), exercise=exercise_name, sandbox=sandbox, course=course)
    console.print(render.build(result))
    target = root / platform.results_file
    try:
        platforms.write_results(target, formats.dumps(formats.to_format(result, platform.format)))
    except OSError as err:
        raise click.FileError(str(target), err.strerror) from err
    console.print(f"wrote {target}")
    sys.exit(EXIT_GRADER_FAILED if result.status is Status.ERROR else EXIT_RESULT)


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
