"""Similar submissions in a class: a signal for a person to look at, never a penalty.

Winnowing (Schleimer, Wilkerson and Aiken, 2003), the idea behind MOSS and copydetect, over the
tokens of each file's normal form (grader.codenorm: dead code dropped, equivalent tensor ops written
one way, split lines joined, independent statements in one order), where every name is one symbol;
code that does not parse falls back to its plain Python tokens (comments and layout dropped, names
and strings one symbol each). Each run of K tokens is hashed; in every window of W consecutive
hashes the smallest is the file's fingerprint, so any shared run of at least K + W - 1 tokens is seen.

What everyone shares is left out before files are compared: runs in the exercise's statement's
code or a given template, and the class's own boilerplate (fingerprints that many of the class's
files have, whoever wrote them). A file with little code left after that (a `return x` stub) is
paired with no one on what little it has, unless it is byte for byte another file.

Pairs are also sought against earlier terms' submissions and against known sources: library code
that implements the exercise (an exercise's `known_sources/*.toml` names it, read from the installed
package), so a submission made of a library's own implementation is shown as copied from it.

Written here rather than taken from copydetect (PyPI 0.5.0): copydetect tokenises with Pygments and
brings NumPy, tqdm and its own HTML report (with script), while the class report is one
self-contained file without script; and a normal form of Python is what sees through the disguises
the bench measures (bench/similarity.py compares the two on one class).
"""
from __future__ import annotations

import ast
import enum
import hashlib
import importlib.util
import io
import json
import keyword
import math
import re
import tokenize
import tomllib
import zlib
from typing import Any
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from grader import codenorm
from grader.errors import GraderError

K = 12            # tokens in a hashed run: shorter runs (one typical line) are everyone's
W = 8             # window of the winnowing: a run of K + W - 1 = 19 shared tokens is always found
THRESHOLD = 0.8   # share of fingerprints in common from which a pair is shown (bench/similarity.py)
MAX_PAIRS = 50    # pairs the class report shows; similar.csv and similar.json have them all
BOILERPLATE_SHARE = 0.3   # a fingerprint in this share of the class's files (and in more than
BOILERPLATE_MIN = 4       # this many) is the class's boilerplate, not a sign of copying
MIN_FINGERPRINTS = 8      # a file with fewer left after boilerplate is too short to pair
NEAR_COPY = 0.95          # files this alike count as one when finding the boilerplate

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}
_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)}
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")


class BadThreshold(GraderError):
    """A similarity threshold that is not a share between 0 and 1."""

    def __init__(self, value: object, where: str):
        self.value, self.where = value, where
        super().__init__(f"{where} must be a number from 0 to 1 (a share of fingerprints in common), not {value}")


def check_threshold(value: Any, where: str = "--similar-threshold") -> float:
    """`value` as a threshold: a finite number in (0, 1]; else BadThreshold naming `where`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadThreshold(value, where) from None
    if not math.isfinite(number) or not 0 < number <= 1:
        raise BadThreshold(value, where)
    return number


class Origin(enum.Enum):
    """Where the other file of a pair comes from."""
    CLASS = "class"                  # a classmate
    EARLIER = "earlier term"         # a submission of an earlier term (--compare-with)
    KNOWN = "known source"           # library code that implements the exercise


@dataclass(frozen=True)
class File:
    name: str
    source: bytes      # the Python the grader ran (a notebook's code cells), in its own encoding
    sha256: str = ""   # of the file as handed in: equal hashes are identical files
    origin: Origin = Origin.CLASS


@dataclass(frozen=True)
class Pair:
    a: str                      # a submission of this class
    b: str                      # a classmate, an earlier term's submission, or a known source's name
    similarity: float           # share of the smaller file's fingerprints that the other has
    identical: bool             # the same file, byte for byte, whatever the names
    lines_a: tuple[tuple[int, str, bool], ...]   # (line number, text, shared with b)
    lines_b: tuple[tuple[int, str, bool], ...]   # (of a known source: its shared lines only)
    origin: Origin = Origin.CLASS

    @property
    def note(self) -> str:
        """What a person reads next to the pair."""
        if self.identical:
            return "identical files"
        return {Origin.CLASS: "", Origin.EARLIER: "an earlier term's submission",
                Origin.KNOWN: f"copied from {self.b.split(':', 1)[0]}'s source"}[self.origin]


@dataclass(frozen=True)
class Findings:
    """Every pair found (most alike first), and what was left out to find them."""
    pairs: tuple[Pair, ...]
    threshold: float
    short: tuple[str, ...] = ()      # submissions too short, after boilerplate, to be paired
    boilerplate: int = 0             # fingerprints left out as the class's boilerplate

    def shown(self, cap: int = MAX_PAIRS) -> tuple[Pair, ...]:
        return self.pairs[:cap]

    def cut(self, cap: int = MAX_PAIRS) -> int:
        """How many pairs the report leaves out for the cap."""
        return max(0, len(self.pairs) - cap)


# --- tokens ---------------------------------------------------------------------------------------

Token = tuple[str, frozenset[int]]   # (symbol, lines of the original it stands for)


def tokens(source: bytes) -> list[Token]:
    """The tokens of `source`'s normal form (grader.codenorm), or of the source itself where it does
    not parse."""
    text = _decoded(source)
    form = codenorm.normal_form(text)
    if form is None:
        return plain_tokens(source)
    out: list[Token] = []
    for statement in form:
        out.extend((symbol, statement.lines) for symbol, _ in plain_tokens(statement.text.encode()))
    return out


def plain_tokens(source: bytes) -> list[Token]:
    """The Python tokens of `source`, names and strings one symbol each. Code that does not
    tokenise is cut where it stops."""
    out: list[Token] = []
    previous = ""
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type in _SKIP:
                continue
            if tok.type == tokenize.NAME and not keyword.iskeyword(tok.string) and previous != ".":
                symbol = "N"
            elif tok.type == tokenize.STRING or tok.type in _FSTRING:
                symbol = "S"
            else:
                symbol = tok.string
            out.append((symbol, frozenset(range(tok.start[0], tok.end[0] + 1))))
            previous = tok.string
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):  # SyntaxError: a wrong coding cookie too
        pass
    return out


def _runs(toks: list[Token]) -> list[tuple[int, frozenset[int]]]:
    """(hash, lines) of every run of K tokens."""
    return [(zlib.crc32("\0".join(t[0] for t in toks[i:i + K]).encode()), frozenset().union(*(t[1] for t in toks[i:i + K])))
            for i in range(len(toks) - K + 1)]


def fingerprints(runs: list[tuple[int, frozenset[int]]]) -> set[int]:
    """The winnowed hashes: the smallest in each window of W (one per window, as the method has it)."""
    hashes = [h for h, _ in runs]
    if len(hashes) <= W:
        return set(hashes)
    return {min(hashes[i:i + W]) for i in range(len(hashes) - W + 1)}


# --- what everyone shares -----------------------------------------------------------------------------

def starter_code(statement: Path | None, template: Path | None = None) -> list[str]:
    """What every student may share: the code in the exercise's statement (its code blocks and
    inline code) and a template file the instructor handed out."""
    chunks = []
    if statement is not None and statement.is_file():
        text = statement.read_text(encoding="utf-8")
        chunks += _FENCE.findall(text) + _INLINE.findall(_FENCE.sub("", text))
    if template is not None:
        chunks.append(template.read_text(encoding="utf-8", errors="replace"))
    return chunks


def known_sources(exercise_dir: Path) -> list[File]:
    """The library code that implements the exercise, as its `known_sources/*.toml` names it:
    definitions read from the installed package's own files (nothing of them is shipped). A package
    that is not installed, or a name it no longer has, is skipped."""
    out = []
    for spec in sorted((exercise_dir / "known_sources").glob("*.toml")):
        for entry in tomllib.loads(spec.read_text(encoding="utf-8")).get("source", []):
            found = importlib.util.find_spec(entry["package"])  # the package itself is not imported
            if found is None or not found.origin:
                continue
            path = Path(found.origin).parent / entry["file"]
            try:
                text = path.read_text(encoding="utf-8")
                tree = ast.parse(text)
            except (OSError, SyntaxError, ValueError):
                continue
            lines = text.splitlines()
            kept = [""] * len(lines)   # the named definitions, at their own line numbers
            names = []
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in entry["names"]:
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    kept[first - 1:node.end_lineno] = lines[first - 1:node.end_lineno]
                    names.append(node.name)
            if names:
                out.append(File(f"{entry['package']}: {entry['file']} ({', '.join(names)}){_version(entry['package'])}",
                                "\n".join(kept).encode(), origin=Origin.KNOWN))
    return out


def _version(package: str) -> str:
    from importlib import metadata
    try:
        return f" ({package} {metadata.version(package)})"
    except metadata.PackageNotFoundError:
        return ""


# --- pairs ------------------------------------------------------------------------------------------

@dataclass
class _Prepared:
    file: File
    runs: list[tuple[int, frozenset[int]]]
    prints: set[int]


def find(files: list[File], starter: Sequence[str] = (), threshold: float = THRESHOLD) -> Findings:
    """The pairs of files whose code is much alike (and every pair of identical files), most alike
    first. Pairs are between two of the class (origin CLASS), or one of the class and an earlier
    term's file or a known source; never two earlier or known ones."""
    compared, short, boilerplate = _compare(files, starter)
    pairs = []
    for x, y, figure, identical in compared:
        if identical or figure >= threshold:
            both = {h for h, _ in x.runs} & {h for h, _ in y.runs}
            known = y.file.origin is Origin.KNOWN
            pairs.append(Pair(x.file.name, y.file.name, 1.0 if identical else figure, identical,
                              _lines(x.file, x.runs, both), _lines(y.file, y.runs, both, only_shared=known),
                              y.file.origin))
    pairs.sort(key=lambda p: (-p.identical, -p.similarity, p.a, p.b))
    return Findings(tuple(pairs), threshold, tuple(sorted(short)), boilerplate)


def scores(files: list[File], starter: Sequence[str] = ()) -> dict[frozenset[str], float]:
    """The figure of every pair, however low (for measuring the finder: bench/similarity.py)."""
    compared, _, _ = _compare(files, starter)
    return {frozenset((x.file.name, y.file.name)): 1.0 if identical else figure
            for x, y, figure, identical in compared}


def _compare(files: list[File], starter: Sequence[str]):
    """Every pair to consider with its figure, the short files and the number of boilerplate fingerprints."""
    shared_by_all = set()
    for chunk in starter:
        shared_by_all |= {h for h, _ in _runs(tokens(chunk.encode()))}
    prepared = []
    for f in files:
        runs = [r for r in _runs(tokens(f.source)) if r[0] not in shared_by_all]
        prepared.append(_Prepared(f, runs, fingerprints(runs)))
    submissions = [p for p in prepared if p.file.origin is not Origin.KNOWN]
    boilerplate = _boilerplate(submissions)
    for p in submissions:
        p.prints -= boilerplate
    short = {p.file.name for p in submissions if len(p.prints) < MIN_FINGERPRINTS}
    compared = []
    ordered = sorted(prepared, key=lambda p: (p.file.origin is not Origin.CLASS, p.file.name))
    for x, y in combinations(ordered, 2):
        if x.file.origin is not Origin.CLASS:
            break  # the rest pair two files of other origins
        identical = bool(x.file.sha256) and x.file.sha256 == y.file.sha256
        if x.file.name in short or y.file.name in short:
            figure = 0.0
        elif y.file.origin is Origin.KNOWN:  # the share of the submission found in the library's code
            figure = len(x.prints & y.prints) / len(x.prints)
        else:
            figure = len(x.prints & y.prints) / min(len(x.prints), len(y.prints))
        compared.append((x, y, figure, identical))
    return compared, short, len(boilerplate)


def _boilerplate(files: list[_Prepared]) -> set[int]:
    """Fingerprints so many files of the class have that they say nothing about copying. Files that
    are near copies of each other count once: twenty students handing in one solution do not make
    it the class's boilerplate (and so hide it), while code all kinds of solutions share still is."""
    parent = list(range(len(files)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for i, j in combinations(range(len(files)), 2):
        a, b = files[i].prints, files[j].prints
        if a and b and len(a & b) >= NEAR_COPY * min(len(a), len(b)):
            parent[root(i)] = root(j)
    groups: dict[int, set[int]] = {}
    for i, p in enumerate(files):
        groups.setdefault(root(i), set()).update(p.prints)
    count: dict[int, int] = {}
    for prints in groups.values():
        for h in prints:
            count[h] = count.get(h, 0) + 1
    floor = max(BOILERPLATE_MIN, BOILERPLATE_SHARE * len(groups))
    return {h for h, n in count.items() if n > floor}


def _lines(file: File, runs: list[tuple[int, frozenset[int]]], common: set[int], *,
           only_shared: bool = False) -> tuple[tuple[int, str, bool], ...]:
    """Every line of the file (or only its shared ones), marked where a run the other file shares covers it."""
    shared: set[int] = set()
    for h, lines in runs:
        if h in common:
            shared |= lines
    numbered = ((n, line, n in shared) for n, line in enumerate(_decoded(file.source).splitlines(), 1))
    return tuple(row for row in numbered if row[2] or not only_shared)


def _decoded(source: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"
    return source.decode(encoding, errors="replace")


# --- files for the instructor ----------------------------------------------------------------------

CSV_HEADER = ("submission", "other", "other_origin", "similarity", "identical", "note")   # similar.csv


def csv_rows(findings: Findings) -> list[list[str]]:
    """similar.csv's rows: one per pair found (all of them, not only those the report shows)."""
    return [[p.a, p.b, p.origin.value, f"{p.similarity:.3f}", "yes" if p.identical else "no", p.note]
            for p in findings.pairs]


def to_json(findings: Findings, *, cap: int = MAX_PAIRS) -> str:
    """similar.json: the pairs with their shared lines, the threshold and what was left out."""
    def lines(rows):
        return [n for n, _, shared in rows if shared]
    document = {
        "threshold": findings.threshold, "pairs_found": len(findings.pairs), "report_shows": min(cap, len(findings.pairs)),
        "short": list(findings.short), "boilerplate_fingerprints": findings.boilerplate,
        "pairs": [{"submission": p.a, "other": p.b, "other_origin": p.origin.value, "similarity": round(p.similarity, 4),
                   "identical": p.identical, "note": p.note, "shared_lines": lines(p.lines_a),
                   "other_shared_lines": lines(p.lines_b)} for p in findings.pairs]}
    return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
