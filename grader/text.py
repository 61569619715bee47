"""The one sanitiser for text that came from the student: names, messages, feedback, printed output.

Every GradeResult passes its text through `safe` when it is made (grader.result), and the batch
passes its submission names through it (grader.batch): the terminal, the native JSON, the CSV, the
HTML and both platforms' files then only ever see text that
- encodes as UTF-8: a lone surrogate (from an exception message, or a file name that is not UTF-8,
  which Python reads with surrogate escapes) becomes U+FFFD instead of failing every write;
- moves no cursor and styles nothing: escape sequences (CSI, OSC such as window titles and links,
  and the rest) are removed whole, and every other C0 and C1 control character too, but a newline
  and a tab in multi-line text;
- reads in the order it is stored: the bidirectional overrides, embeddings and isolates that can
  make a line display as something else are removed.
"""
from __future__ import annotations

import re

_ESCAPE = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"       # OSC ... BEL/ST (title, hyperlink)
    r"|\x1b[P^_X][^\x1b\x9c]*(?:\x1b\\|\x9c)?"           # DCS, PM, APC, SOS ... ST
    r"|(?:\x1b\[|\x9b)[0-9:;<=>?]*[ -/]*[@-~]?"           # CSI (cursor, colours, clear screen)
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"         # OSC in its C1 form
    r"|\x1b[ -/]*[0-~]?")                                # any other escape
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_MULTI_LINE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_ONE_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}]")


def safe(text: object, *, one_line: bool = False) -> str:
    """`text` as a string fit for any output: see the module's docstring. With `one_line` (a name,
    a title) newlines and tabs go too, each replaced by a space."""
    text = _SURROGATE.sub("\ufffd", str(text))
    text = _ESCAPE.sub("", text)
    if one_line:
        return _ONE_LINE.sub(lambda m: " " if m.group() in "\n\t\r" else "", text)
    return _MULTI_LINE.sub("", text.replace("\r\n", "\n"))
