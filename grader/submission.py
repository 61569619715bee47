"""Reading what a student uploaded: a .py file as CPython would read it, or a notebook's code cells."""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path

from grader.errors import SubmissionRejected
from sandbox.source import CellSpan, LineMap

MAX_SOURCE_BYTES = 512 * 1024       # far above any honest solution (about 2 KB)
MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024  # notebooks carry outputs and images


@dataclass(frozen=True)
class Submission:
    """A gradable script and where it came from."""
    name: str
    sha256: str
    script: bytes            # what the sandbox imports
    line_map: LineMap        # script line -> notebook cell, empty for a .py file

    @property
    def is_notebook(self) -> bool:
        return bool(self.line_map.spans)


def read(path: Path) -> Submission:
    """Read and check a submission; raises SubmissionRejected with a precise reason."""
    try:
        data = path.read_bytes()
    except IsADirectoryError as err:
        raise SubmissionRejected("unreadable", f"{path} is a folder, not a file") from err
    except OSError as err:
        raise SubmissionRejected("unreadable", f"cannot read {path}: {err.strerror}") from err
    digest = hashlib.sha256(data).hexdigest()
    if path.suffix == ".ipynb":
        if len(data) > MAX_NOTEBOOK_BYTES:
            raise _too_large(len(data), MAX_NOTEBOOK_BYTES, "notebook")
        script, line_map = notebook_script(data)
    else:
        script, line_map = data, LineMap()
    if len(script) > MAX_SOURCE_BYTES:
        raise _too_large(len(script), MAX_SOURCE_BYTES, "source")
    check_compiles(script, line_map)
    return Submission(path.name, digest, script, line_map)


def _too_large(size: int, limit: int, what: str) -> SubmissionRejected:
    return SubmissionRejected("too_large", f"the {what} is {size:,} bytes; the limit is {limit:,} bytes")


def check_compiles(script: bytes, line_map: LineMap) -> None:
    """Compile (never run) the script exactly as CPython would import it."""
    if not script.strip():
        raise SubmissionRejected("empty", "the submission is empty: it must define class CausalSelfAttention")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences: CPython accepts them
            compile(script, "submission.py", "exec", dont_inherit=True)
    except SyntaxError as err:
        line = err.lineno
        if "null bytes" in str(err.msg):
            raise SubmissionRejected("undecodable", "Python cannot read the file: it contains null "
                                     "bytes (is it a binary file?)") from err
        if isinstance(err.__cause__, UnicodeDecodeError) or "decode" in str(err.msg) or "encoding" in str(err.msg):
            raise SubmissionRejected("undecodable", f"Python cannot decode the file: {err.msg}. Save it as "
                                     f"UTF-8, or declare its encoding in a '# -*- coding: ... -*-' line",
                                     line=line, where=line_map.place(line) if line else None) from err
        where = line_map.place(line) if line else None
        text = (err.text or "").rstrip()
        detail = f"\n    {text.strip()}" if text else ""
        raise SubmissionRejected("syntax_error", f"syntax error at {where}: {err.msg}{detail}",
                                 line=line, where=where) from err
    except ValueError as err:  # "source code string cannot contain null bytes" (Python 3.11)
        raise SubmissionRejected("undecodable", f"Python cannot read the file: {err}") from err
    except (MemoryError, RecursionError) as err:  # CPython's parser gives up on absurd nesting
        raise SubmissionRejected("too_complex", f"Python's parser gives up on this file "
                                 f"({type(err).__name__}): is an expression nested thousands deep?") from err


def notebook_script(data: bytes) -> tuple[bytes, LineMap]:
    """The code cells of a notebook as one script; IPython magics and shell lines are dropped."""
    import nbformat
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbformat warns about old notebooks it still reads
            notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as err:  # nbformat raises its own validation errors besides the usual ones
        raise SubmissionRejected("bad_notebook", f"this is not a readable Jupyter notebook: "
                                 f"{type(err).__name__}: {str(err)[:300]}") from err
    lines: list[str] = []
    spans: list[CellSpan] = []
    code_cell = 0
    for cell in notebook.cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code_cell += 1
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if not isinstance(source, str):
            raise SubmissionRejected("bad_notebook", f"code cell {code_cell} has no readable source")
        cell_lines = _python_lines(source)
        if cell_lines is None:
            continue  # a cell magic whose body is not Python (%%bash, %%writefile, ...)
        spans.append(CellSpan(len(lines) + 1, len(cell_lines), code_cell))
        lines.extend(cell_lines)
        lines.append("")
    return "\n".join(lines).encode(), LineMap(tuple(spans))


def _python_lines(source: str) -> list[str] | None:
    """A cell's lines with IPython syntax neutralised, or None for a cell magic (%%...).

    Cell magics are skipped whole: most are not Python (%%bash), and those that are (%%time,
    %%timeit) hold timing runs, often on a GPU, that a grader should not repeat.

    A line magic (%...) or shell line (!...) that starts a statement becomes `pass` at its
    indentation, so blocks stay valid and line numbers still match; a line that merely begins
    with % or ! inside an open bracket (`(mask\n != 0)`) is Python and stays."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        return None
    out: list[str] = []
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")) and _at_statement_start(out):
            out.append(line[:len(line) - len(stripped)] + "pass")
        else:
            out.append(line)
    return out


def _at_statement_start(previous: list[str]) -> bool:
    """True unless the lines so far end inside brackets or after a backslash continuation."""
    import io
    import tokenize
    try:
        for _ in tokenize.generate_tokens(io.StringIO("\n".join(previous) + "\n").readline):
            pass
    except tokenize.TokenError:
        return False
    except (SyntaxError, ValueError):  # some other problem: compile() will report it
        return True
    return True
