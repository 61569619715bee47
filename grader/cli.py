"""The `grade` command line. It parses, calls one core function, and renders; nothing more."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

import exercise as exercises
import sandbox.backend as backends
from grader import __version__, grading, render
from grader.errors import SandboxFailure
from grader.result import GradeResult

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

    Exit status: 0 when a result was produced (whatever the score), 1 when the grader itself
    failed, 2 for a bad command line.
    """


@main.command("file")
@click.argument("submission", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "json_out", metavar="OUT", help="Write the result JSON to OUT ('-' for stdout).")
@click.option("--sandbox", type=click.Choice(sorted(backends.available())), default=grading.DEFAULT_SANDBOX,
              show_default=True, help="Where the submission runs.")
@click.option("--exercise", "exercise_name", default=exercises.DEFAULT, show_default=True,
              help="The exercise to grade against (see `grade exercises`).")
@click.option("--time-limit", type=click.FloatRange(min=1), metavar="SECONDS",
              help="Wall-clock limit for the whole grade (default: the exercise's own).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on the terminal.")
def grade_one(submission: Path, json_out: str | None, sandbox: str, exercise_name: str,
              time_limit: float | None, quiet: bool):
    """Grade one SUBMISSION (.py or .ipynb) and print the feedback."""
    try:
        exercises.get(exercise_name)
    except exercises.UnknownExercise as err:
        raise click.BadParameter(str(err), param_hint="--exercise") from err
    if not submission.exists():
        raise click.BadParameter(f"{submission} does not exist", param_hint="SUBMISSION")
    # With JSON on stdout, the readable feedback moves to stderr so the JSON stays parseable.
    console = Console(stderr=json_out == "-", highlight=False)
    try:
        result = grading.grade_file(submission, exercise=exercise_name, sandbox=sandbox, wall_s=time_limit)
        code = EXIT_RESULT
    except backends.SandboxUnavailable as err:
        raise click.ClickException(str(err)) from err
    except SandboxFailure as failure:
        result = grading.error_result(submission, failure.message, exercise=exercise_name, sandbox=sandbox)
        if failure.log and not quiet:
            console.print(Text(failure.log[-2000:], style="dim"))
        code = EXIT_GRADER_FAILED
    if not quiet:
        console.print(render.build(result))
    if json_out:
        _write_json(result, json_out)
    sys.exit(code)


@main.command("exercises")
def list_exercises():
    """List the exercises this grader knows."""
    for name, ex in sorted(exercises.all_exercises().items()):
        click.echo(f"{name}\t{ex.title} (version {ex.version})")


def _write_json(result: GradeResult, out: str) -> None:
    text = json.dumps(result.to_dict(), indent=2, ensure_ascii=False)
    if out == "-":
        click.echo(text)
        return
    try:
        Path(out).write_text(text + "\n")
    except OSError as err:
        raise click.FileError(out, err.strerror) from err
