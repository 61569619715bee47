"""Reading what a student uploaded: a .py file as CPython would read it, or a notebook's code cells."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import SubmissionRejected
from sandbox.source import CellSpan, LineMap

MAX_SOURCE_BYTES = 512 * 1024       # far above any honest solution (about 2 KB)
MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024  # notebooks carry outputs and images
COMPILE_S = 10                      # an honest file compiles in milliseconds, the largest allowed in < 1 s


@dataclass(frozen=True)
class Submission:
    """A gradable script and where it came from."""
    name: str
    sha256: str              # of the file's bytes
    script: bytes            # what the sandbox imports
    line_map: LineMap        # script line -> notebook cell, empty for a .py file
    script_sha256: str = ""  # of the script: the file's own hash but for a notebook

    @property
    def is_notebook(self) -> bool:
        return bool(self.line_map.spans)


def read(path: Path, *, compiles: bool = True, data: bytes | None = None) -> Submission:
    """Read and check a submission; raises SubmissionRejected with a precise reason. `compiles`
    False skips the compile check (its own process): for a file already graded, by its hash.
    `data`: the file's bytes, when the caller read them already (a batch reads each file once)."""
    data = read_bytes(path) if data is None else data
    digest = hashlib.sha256(data).hexdigest()
    if path.suffix == ".ipynb":
        script, line_map = notebook_script(data)
    else:
        script, line_map = data, LineMap()
    if len(script) > MAX_SOURCE_BYTES:
        raise _too_large(len(script), MAX_SOURCE_BYTES, "source")
    if compiles:
        check_compiles(script, line_map)
    return Submission(path.name, digest, script, line_map,
                      digest if script is data else hashlib.sha256(script).hexdigest())


def size_limit(name: str) -> tuple[int, str]:
    """The most bytes a file called `name` may have, and what kind it is read as (its suffix says)."""
    return (MAX_NOTEBOOK_BYTES, "notebook") if Path(name).suffix == ".ipynb" else (MAX_SOURCE_BYTES, "source")


def read_bytes(path: Path) -> bytes:
    """The file's bytes, read only when it is a regular file within the size limit of its kind: a
    sparse file of hundreds of gigabytes, a FIFO or a device is refused before anything is read."""
    limit, what = size_limit(path.name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise SubmissionRejected("unreadable", f"cannot read {path}: {err.strerror}") from err
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SubmissionRejected("unreadable", f"{path} is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise SubmissionRejected("unreadable", f"{path} is not a regular file")
        if info.st_size > limit:
            raise _too_large(info.st_size, limit, what)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as err:
        raise SubmissionRejected("unreadable", f"cannot read {path}: {err.strerror}") from err
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise _too_large(len(data), limit, what)
    return data


def _too_large(size: int, limit: int, what: str) -> SubmissionRejected:
    return SubmissionRejected("too_large", f"the {what} is {size:,} bytes; the limit is {limit:,} bytes")


# Run by a child Python: CPython's compiler takes quadratic time (or more) on some sources, and a
# compile in this process could not be stopped. The child reports how compile() ended as JSON.
_COMPILE_CHILD = """
import json, resource, sys, warnings
resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
source = sys.stdin.buffer.read()
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. invalid escape sequences: CPython accepts them
        compile(source, "submission.py", "exec", dont_inherit=True)
    ended = {{"ok": True}}
except SyntaxError as err:
    ended = {{"type": "SyntaxError", "msg": str(err.msg), "lineno": err.lineno, "text": err.text,
             "decode": isinstance(err.__cause__, UnicodeDecodeError)}}
except ValueError as err:  # "source code string cannot contain null bytes" (Python 3.11)
    ended = {{"type": "ValueError", "msg": str(err)}}
except (MemoryError, RecursionError) as err:
    ended = {{"type": type(err).__name__}}
sys.stdout.write(json.dumps(ended))
"""


def check_compiles(script: bytes, line_map: LineMap) -> None:
    """Compile (never run) the script exactly as CPython would import it, in a child Python
    bounded in time and memory."""
    if not script.strip():
        raise SubmissionRejected("empty", "the submission is empty: it has no code at all")
    child = _COMPILE_CHILD.format(cpu=COMPILE_S + 1, memory=4 << 30)
    try:
        ran = subprocess.run([sys.executable, "-I", "-S", "-c", child], input=script, capture_output=True,
                             timeout=COMPILE_S)
        ended: dict[str, Any] = json.loads(ran.stdout) if ran.returncode == 0 else {"type": f"exit {ran.returncode}"}
    except subprocess.TimeoutExpired:
        raise SubmissionRejected("too_complex", f"Python takes more than {COMPILE_S} s to compile this "
                                 "file (an honest solution takes milliseconds): is some statement "
                                 "repeated tens of thousands of times?") from None
    except ValueError:
        ended = {"type": "no answer"}
    if ended.get("ok"):
        return
    kind, message = ended.get("type"), str(ended.get("msg") or "")
    if kind == "SyntaxError":
        line = ended.get("lineno") if isinstance(ended.get("lineno"), int) else None
        where = line_map.place(line) if line else None
        if "null bytes" in message:
            raise SubmissionRejected("undecodable", "Python cannot read the file: it contains null "
                                     "bytes (is it a binary file?)")
        if ended.get("decode") or "decode" in message or "encoding" in message:
            raise SubmissionRejected("undecodable", f"Python cannot decode the file: {message}. Save it as "
                                     f"UTF-8, or declare its encoding in a '# -*- coding: ... -*-' line",
                                     line=line, where=where)
        text = str(ended.get("text") or "").strip()
        text = text if len(text) <= 200 else text[:200] + " ..."
        detail = f"\n    {text}" if text else ""
        raise SubmissionRejected("syntax_error", f"syntax error at {where}: {message}{detail}",
                                 line=line, where=where)
    if kind == "ValueError":
        raise SubmissionRejected("undecodable", f"Python cannot read the file: {message}")
    # MemoryError, RecursionError, or a compiler that crashed or ran out of its limits
    raise SubmissionRejected("too_complex", f"Python's parser gives up on this file ({kind}): is an "
                             "expression nested thousands deep?")


def notebook_script(data: bytes) -> tuple[bytes, LineMap]:
    """The code cells of a notebook as one script; IPython magics and shell lines are dropped."""
    import warnings

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
    with % or ! inside an open bracket (`(mask\n != 0)`), a string or after a backslash is Python
    and stays. The cell is tokenised once, line by line as the lines are decided: linear time
    whatever the number of magics."""
    lines = source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        return None
    out: list[str] = []
    remaining = iter(lines)
    while len(out) < len(lines):
        try:
            _neutralise(remaining, out)
        except (tokenize.TokenError, SyntaxError, ValueError):
            pass  # compile() will report the problem; the next line starts a fresh tokeniser
    return out


def _neutralise(lines, out: list[str]) -> None:
    """Tokenise `lines`, appending each to `out` as the tokeniser asks for it: a magic line is
    recognised when the tokens so far end a line outside any bracket (a NEWLINE or NL token at
    depth 0; no such token ends a line inside a string or before a backslash continuation)."""
    state = {"depth": 0, "start": True}

    def readline() -> str:
        line = next(lines, None)
        if line is None:
            return ""
        stripped = line.lstrip()
        if state["start"] and not state["depth"] and stripped.startswith(("%", "!")):
            line = line[:len(line) - len(stripped)] + "pass"
        out.append(line)
        state["start"] = False
        return line + "\n"

    for token in tokenize.generate_tokens(readline):
        if token.type == tokenize.OP and token.string in "([{":
            state["depth"] += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            state["depth"] = max(0, state["depth"] - 1)
        state["start"] = token.type in (tokenize.NEWLINE, tokenize.NL)
