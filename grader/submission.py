"""Reading what a student uploaded: a .py file as CPython would read it, or a notebook's code cells."""
from __future__ import annotations

import hashlib
import json
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


def notebook_script(data: bytes) -> tuple[bytes, LineMap]:
    """The code cells of a notebook as one script; IPython magics and shell lines are dropped."""
    import nbformat
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbformat warns about old notebooks it still reads
            notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as err:
        raise SubmissionRejected("bad_notebook", f"this is not a readable Jupyter notebook: {err}") from err
    lines: list[str] = []
    spans: list[CellSpan] = []
    code_cell = 0
    for cell in notebook.cells:
        if cell.get("cell_type") != "code":
            continue
        code_cell += 1
        source = cell.get("source", "")
        if source.lstrip().startswith("%%"):
            continue  # a cell magic: the whole cell belongs to IPython
        cell_lines = [_strip_ipython(line) for line in source.splitlines()]
        spans.append(CellSpan(len(lines) + 1, len(cell_lines), code_cell))
        lines.extend(cell_lines)
        lines.append("")
    return "\n".join(lines).encode(), LineMap(tuple(spans))


def _strip_ipython(line: str) -> str:
    """A magic (%...) or shell (!...) line becomes `pass` at its indentation, so blocks stay
    valid and line numbers still match."""
    stripped = line.lstrip()
    return line[:len(line) - len(stripped)] + "pass" if stripped.startswith(("%", "!")) else line
