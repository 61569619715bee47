"""Reading submissions: what CPython accepts is accepted; everything else is rejected precisely."""
import json

import pytest

from grader import submission
from grader.errors import SubmissionRejected


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def notebook(*cells):
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": kind, "metadata": {}, "source": src, **({"outputs": [], "execution_count": None}
                                                             if kind == "code" else {})}
        for kind, src in cells]})


def test_latin1_file_with_coding_cookie_is_accepted(tmp_path):
    path = write(tmp_path, "a.py", "# -*- coding: latin-1 -*-\n# caf\xe9\nclass CausalSelfAttention: pass\n".encode("latin-1"))
    assert submission.read(path).script.startswith(b"# -*- coding: latin-1")


def test_utf8_bom_is_accepted(tmp_path):
    assert submission.read(write(tmp_path, "a.py", b"\xef\xbb\xbfx = 1\n"))


@pytest.mark.parametrize("data,reason,text", [
    (b"x = '\xff'\n", "undecodable", "cannot decode"),
    (b"x = 1\0\n", "undecodable", "null bytes"),
    (b"", "empty", "empty"),
    (b"\n\n  \n", "empty", "empty"),
    (b"x = 1\ndef f(:\n    pass\n", "syntax_error", "line 2"),
])
def test_unreadable_sources_are_rejected_with_a_reason(tmp_path, data, reason, text):
    with pytest.raises(SubmissionRejected) as info:
        submission.read(write(tmp_path, "a.py", data))
    assert info.value.reason == reason
    assert text in info.value.message


@pytest.mark.unit
def test_too_large_source_is_rejected(tmp_path):
    path = write(tmp_path, "a.py", "# pad\n" * (submission.MAX_SOURCE_BYTES // 6 + 10))
    with pytest.raises(SubmissionRejected, match="limit is") as info:
        submission.read(path)
    assert info.value.reason == "too_large"


def test_notebook_magics_are_dropped_and_lines_map_to_cells(tmp_path):
    nb = notebook(("markdown", "# Title"),
                  ("code", "%matplotlib inline\nimport math"),
                  ("code", "%%bash\nthis is not python"),
                  ("code", "!pip install torch\nfor i in range(2):\n    %time print(i)\nx = math.pi"))
    sub = submission.read(write(tmp_path, "a.ipynb", nb))
    script = sub.script.decode()
    assert "matplotlib" not in script and "not python" not in script and "pip" not in script
    compile(sub.script, "s", "exec")
    last = script.splitlines().index("x = math.pi") + 1
    assert sub.line_map.place(last) == "cell 3, line 4"


def test_notebook_syntax_error_names_the_cell(tmp_path):
    nb = notebook(("code", "import math"), ("code", "x = 1\ny = (\n"))
    with pytest.raises(SubmissionRejected, match="cell 2, line 2"):
        submission.read(write(tmp_path, "a.ipynb", nb))


@pytest.mark.unit
def test_broken_notebook_json_is_rejected(tmp_path):
    with pytest.raises(SubmissionRejected) as info:
        submission.read(write(tmp_path, "a.ipynb", "{not json"))
    assert info.value.reason == "bad_notebook"


def test_notebook_keeps_python_that_only_looks_like_a_magic(tmp_path):
    nb = notebook(("code", "mask = [1]\nok = (mask\n!= 0)\nx = (5\n% 3)"),
                  ("code", "%%time\ny = 2"), ("code", "%%bash\necho hi"))
    sub = submission.read(write(tmp_path, "a.ipynb", nb))
    scope = {}
    exec(compile(sub.script, "s", "exec"), scope)
    assert scope["ok"] is True and scope["x"] == 2
    assert "y" not in scope and b"echo hi" not in sub.script   # cell magics are skipped whole
