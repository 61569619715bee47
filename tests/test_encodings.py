"""Every file CPython 3.11 imports is graded: a correct layer keeps full marks whatever its bytes
look like around the code (an encoding cookie, a byte order mark, bytes that are not UTF-8 in a
comment, CRLF or CR line ends, form feeds, tabs, a very long line). Each form is made from
examples/correct.py, checked to compile as CPython's import compiles it, and graded in both sandboxes by a
warm batch; the form the grader once rejected (Latin-1 in a comment: "your code ended the process
with exit code 70") also through `grade FILE`, the path a student runs."""
from __future__ import annotations

import pytest

from tests.support.corpus import Corpus
from tests.support.grading import EXAMPLES, grade

CORRECT = (EXAMPLES / "correct.py").read_bytes()


def _lines(data: bytes, end: bytes) -> bytes:
    return end.join(data.split(b"\n"))


FORMS: dict[str, bytes] = {
    "latin1_in_a_comment": b"# Auteur : Ren\xe9, caf\xe9 cr\xe8me \xa9 2026\n" + CORRECT,
    "latin1_cookie": b"# -*- coding: latin-1 -*-\n# Auteur : Ren\xe9\nNOM = 'Ren\xe9'\n" + CORRECT,
    "cp1252_cookie": b"# vim: set fileencoding=cp1252 :\n# \x93quoted\x94 \x80 sign\n" + CORRECT,
    "utf8_bom": b"\xef\xbb\xbf" + CORRECT,
    "utf8_bom_and_cookie": b"\xef\xbb\xbf# coding: utf-8\n# na\xc3\xafve caf\xc3\xa9\n" + CORRECT,
    "crlf_line_ends": _lines(CORRECT, b"\r\n"),
    "cr_line_ends": _lines(CORRECT, b"\r"),
    "form_feeds": CORRECT.replace(b"\nclass ", b"\n\x0c\nclass ").replace(b"\n    def ", b"\n\x0c\n    def "),
    "tab_indents": CORRECT.replace(b"        ", b"\t\t").replace(b"    ", b"\t"),
    "very_long_line": b"# " + b"x" * 200_000 + b"\nLONG = (" + b" + ".join(b"1" for _ in range(300)) + b")\n" + CORRECT,
    "no_final_newline": CORRECT.rstrip(b"\n"),
    "unicode_names": CORRECT + b"\n\xc3\xa9chelle = 1.0  # a name outside ASCII\n",
}


def _compiles(data: bytes) -> str | None:
    """What CPython's import does with a source file's bytes (SourceLoader.source_to_code): None
    when it compiles, else why not."""
    try:
        compile(data, "form.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError) as err:
        return repr(err)
    return None


CLASS = {sandbox: Corpus(f"encodings-{sandbox}", {f"{name}.py": (lambda data=data: data) for name, data in FORMS.items()},
                         args=("--sandbox", sandbox)) for sandbox in ("local", "docker")}


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_file_python_imports_is_graded_in_full(form, sandbox):
    assert _compiles(FORMS[form]) is None, f"CPython does not import this form: {_compiles(FORMS[form])}"
    result = CLASS[sandbox].result(f"{form}.py")
    assert (result["status"], result["score"]) == ("graded", 100), result.get("message") or result["feedback"][-2000:]


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_grade_file_grades_latin1_in_a_comment_in_full(tmp_path, sandbox):
    path = tmp_path / "attention.py"
    path.write_bytes(FORMS["latin1_in_a_comment"])
    graded = grade(path, "--sandbox", sandbox)
    assert graded.exit_code == 0, graded.terminal[-2000:]
    assert (graded.result["status"], graded.result["score"]) == ("graded", 100), graded.terminal[-2000:]
    assert "exit code" not in graded.terminal
