"""The one sanitiser for text that came from the student: names, messages, feedback, printed output.

Every GradeResult passes its text through `safe` (and its submission name through `name`) when it is
made (grader.result), and the batch shows its submission names through `names` (grader.batch): the
terminal, the native JSON, the CSV, the HTML and both platforms' files then only ever see text that
- moves no cursor and styles nothing: escape sequences (CSI, OSC such as window titles and links,
  and the rest) are removed whole;
- hides nothing: every other character that prints nothing (the categories Cc, Cf, Cs, Co, Cn, Zl
  and Zp, which take in the C0 and C1 controls, the bidirectional overrides, embeddings and
  isolates, zero-width spaces and joiners, the word joiner, the soft hyphen, tag characters, the
  byte-order mark, lone surrogates, private-use and unassigned code points, the line and paragraph
  separators; and the default-ignorable fillers and variation selectors) is shown as its escape,
  `\\u200b` as Python writes it, but a newline and a tab in multi-line text. What is shown thus
  encodes as UTF-8 (a lone surrogate from an exception message, or from a file name that is not
  UTF-8, would fail every write) and reads in the order it is stored;
- tells names apart that read the same: `name` also escapes the spaces that are not U+0020 and, in a
  name that mixes Latin with Cyrillic or Greek letters, the look-alike letters (`\\u0430lice.py`);
  `names` escapes, across a class, whatever makes names of one `skeleton` differ, and `lookalikes`
  lists those names for the instructor.

Escapes are ASCII, so each function gives the same text when applied again (a result read back from
its JSON is sanitised again).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_ESCAPE = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"       # OSC ... BEL/ST (title, hyperlink)
    r"|\x1b[P^_X][^\x1b\x9c]*(?:\x1b\\|\x9c)?"           # DCS, PM, APC, SOS ... ST
    r"|(?:\x1b\[|\x9b)[0-9:;<=>?]*[ -/]*[@-~]?"           # CSI (cursor, colours, clear screen)
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"         # OSC in its C1 form
    r"|\x1b[ -/]*[0-~]?")                                # any other escape
# Only characters outside printable ASCII are looked at (one by one): most text has none.
_MULTI_LINE = re.compile(r"[^\x20-\x7e\n\t]")
_ANY = re.compile(r"[^\x20-\x7e]")
_LINE_BREAKS = "\n\t\r"
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# Default-ignorable code points that Unicode files under letters or marks, yet print nothing: the
# combining grapheme joiner, the Hangul and Khmer fillers, the variation selectors.
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0f\uffa0"
                        "\U000e0100-\U000e01ef]")

# Letters of Cyrillic and Greek that read as a Latin letter in common fonts (a small part of
# Unicode's confusables.txt, the part that names in a class of Latin file names meet); NFKC takes
# care of full-width, mathematical and other compatibility forms.
_LOOKALIKE = str.maketrans({
    **dict(zip("аеорсухіјѕԁԛԝһӏɡ", "aeopcyxijsdqwhlg")),          # Cyrillic small
    **dict(zip("АВЕКМНОРСТХУІЈЅԚԜ", "ABEKMHOPCTXYIJSQW")),         # Cyrillic capital
    **dict(zip("οικνρτυχαΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "oikvptuxaABEZHIKMNOPTYX")),  # Greek
    "ı": "i", "ɑ": "a", "ꮃ": "w", "ꭵ": "v",
})
_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")


def escape(ch: str) -> str:
    """`ch` as Python writes it in a string literal: \\x85, \\u200b, \\U000e0041."""
    if ch in _SHORT:
        return _SHORT[ch]
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def prints(ch: str) -> bool:
    """Whether `ch` shows as something on a screen (a space counts; see the module's docstring)."""
    category = unicodedata.category(ch)
    return category[0] != "C" and category not in ("Zl", "Zp") and not _IGNORABLE.match(ch)


def _visible(match: re.Match) -> str:
    ch = match.group()
    return ch if prints(ch) else escape(ch)


def safe(text: object, *, one_line: bool = False) -> str:
    """`text` as a string fit for any output: see the module's docstring. With `one_line` (a
    title, an id) newlines, tabs and carriage returns become spaces."""
    text = _ESCAPE.sub("", str(text))
    if one_line:
        return _ANY.sub(lambda m: " " if m.group() in _LINE_BREAKS else _visible(m), text)
    return _MULTI_LINE.sub(_visible, text.replace("\r\n", "\n"))


def name(raw: object, *, lookalike: bool = False) -> str:
    """A submission's name as every output shows it: on one line, nothing hidden (a tab, a newline
    and a space that is not U+0020 are escaped too), and the look-alike letters escaped in a word
    that mixes Latin with Cyrillic or Greek letters, or everywhere with `lookalike` (names that
    read the same as another name of the class: see `names`)."""
    text = _ESCAPE.sub("", str(raw))
    mixed = [m.span() for m in _WORD.finditer(text) if _mixes_scripts(m.group())]

    def shown(match: re.Match) -> str:
        ch = match.group()
        if ch in _LINE_BREAKS or not prints(ch) or unicodedata.category(ch) == "Zs":
            return escape(ch)
        flagged = lookalike or any(start <= match.start() < end for start, end in mixed)
        return escape(ch) if flagged and _differs(ch) else ch
    return _ANY.sub(shown, text)


_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)  # a run of letters (and their marks)


def _mixes_scripts(word: str) -> bool:
    scripts = {next((s for s in _SCRIPTS if s in unicodedata.name(ch, "").split()), "") for ch in word}
    return "LATIN" in scripts and bool(scripts & set(_SCRIPTS[1:]))


def _differs(ch: str) -> bool:
    """Whether `ch` reads as another character: a look-alike letter, a compatibility form, or a
    combining mark (é written as e and U+0301 reads as é)."""
    return _fold(ch) != ch or unicodedata.category(ch) == "Mn"


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_LOOKALIKE)


def skeleton(raw: object) -> str:
    """What a name reads as: without the characters that print nothing (a byte that was not UTF-8
    reads as U+FFFD), in its NFKC form (composed,
    compatibility forms folded), Cyrillic and Greek look-alikes read as the Latin letter."""
    text = "".join(ch if prints(ch) else "\ufffd" if unicodedata.category(ch) == "Cs" else ""
                   for ch in _ESCAPE.sub("", str(raw)))
    return unicodedata.normalize("NFC", _fold(text))


def lookalikes(raws: Iterable[str]) -> list[tuple[str, ...]]:
    """Groups of two or more different names that read the same (one skeleton, or one shown
    `name`), each sorted, the groups in order of their first name."""
    groups: dict[str, set[str]] = {}
    shown: dict[str, set[str]] = {}
    for raw in set(raws):
        groups.setdefault(skeleton(raw), set()).add(raw)
        shown.setdefault(name(raw), set()).add(raw)
    found = {tuple(sorted(g)) for g in (*groups.values(), *shown.values()) if len(g) > 1}
    return sorted(found)


def names(raws: Iterable[str]) -> dict[str, str]:
    """Each name as a class's outputs show it: `name`, with the look-alikes escaped in the names
    that read the same as another."""
    raws = list(raws)
    alike = {raw for group in lookalikes(raws) for raw in group}
    return {raw: name(raw, lookalike=raw in alike) for raw in raws}


_FORMULA_CELL = re.compile(r"(^|[,;\t|\r\n])(?=[=+\-@\t\r])")


def spreadsheet_safe(value: str) -> str:
    """A CSV cell no spreadsheet runs as a formula: an apostrophe wherever one could start, at the
    start and after each separator a locale may split at (`x;=1+1;.py` read with `;` becomes `x`,
    `'=1+1`, `.py`)."""
    return _FORMULA_CELL.sub(lambda m: m.group(1) + "'", value)
