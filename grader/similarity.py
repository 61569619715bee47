"""Similar submissions in a class: a signal for a person to look at, never a penalty.

Winnowing (Schleimer, Wilkerson and Aiken, 2003), the idea behind MOSS and copydetect, over Python
tokens normalised so that renaming a variable, changing comments or re-spacing the code changes
nothing: comments and blank lines are dropped, every name that is not an attribute (after a `.`)
or a keyword becomes one symbol, every string another. Each run of K tokens is hashed; in every
window of W consecutive hashes the smallest is the file's fingerprint, so any shared run of at
least K + W - 1 tokens is seen. Runs that are in the exercise's starter code (the statement's code)
or in a given template are left out: everyone shares those.

Written here rather than taken from copydetect (PyPI 0.5.0): copydetect tokenises with Pygments and
brings NumPy, tqdm and its own HTML report (with script), while the class report is one
self-contained file without script, and Python's own `tokenize` knows Python better; the whole
method is the few functions below.
"""
from __future__ import annotations

import hashlib
import io
import keyword
import re
import tokenize
import zlib
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

K = 12            # tokens in a hashed run: shorter runs (one typical line) are everyone's
W = 8             # window of the winnowing: a run of K + W - 1 = 19 shared tokens is always found
THRESHOLD = 0.8   # share of fingerprints in common from which a pair is shown (honest solutions of
                  # tests/submissions/correct share up to 0.71: the exercise leaves little room)
MAX_PAIRS = 50

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class File:
    name: str
    source: bytes      # the Python the grader ran (a notebook's code cells), in its own encoding
    sha256: str = ""   # of the file as handed in: equal hashes are identical files


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    similarity: float           # share of the smaller file's fingerprints that the other has
    identical: bool             # the same file, byte for byte, whatever the names
    lines_a: tuple[tuple[int, str, bool], ...]   # (line number, text, shared with b)
    lines_b: tuple[tuple[int, str, bool], ...]


def tokens(source: bytes) -> list[tuple[str, int, int]]:
    """The normalised tokens of `source`: (symbol, first line, last line). Code that does not
    tokenise is cut where it stops."""
    out: list[tuple[str, int, int]] = []
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
            out.append((symbol, tok.start[0], tok.end[0]))
            previous = tok.string
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):  # SyntaxError: a wrong coding cookie too
        pass
    return out


_FSTRING = {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(tokenize, n)}


def _runs(toks: list[tuple[str, int, int]]) -> list[tuple[int, int, int]]:
    """(hash, first line, last line) of every run of K tokens."""
    return [(zlib.crc32("\0".join(t[0] for t in toks[i:i + K]).encode()), toks[i][1], toks[i + K - 1][2])
            for i in range(len(toks) - K + 1)]


def fingerprints(runs: list[tuple[int, int, int]]) -> set[int]:
    """The winnowed hashes: the smallest in each window of W (one per window, as the method has it)."""
    hashes = [h for h, _, _ in runs]
    if len(hashes) <= W:
        return set(hashes)
    return {min(hashes[i:i + W]) for i in range(len(hashes) - W + 1)}


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


def similar_pairs(files: list[File], starter: list[str] = (), threshold: float = THRESHOLD) -> tuple[Pair, ...]:
    """The pairs of files whose code is much alike (and every pair of identical files), most alike first."""
    shared_by_all = set()
    for chunk in starter:
        shared_by_all |= {h for h, _, _ in _runs(tokens(chunk.encode()))}
    runs = {f.name: [r for r in _runs(tokens(f.source)) if r[0] not in shared_by_all] for f in files}
    prints = {name: fingerprints(r) for name, r in runs.items()}
    pairs = []
    for a, b in combinations(sorted(files, key=lambda f: f.name), 2):
        identical = bool(a.sha256) and a.sha256 == b.sha256
        common = prints[a.name] & prints[b.name]
        smaller = min(len(prints[a.name]), len(prints[b.name]))
        figure = 1.0 if identical else len(common) / smaller if smaller else 0.0
        if identical or figure >= threshold:
            both = {h for h, _, _ in runs[a.name]} & {h for h, _, _ in runs[b.name]}
            pairs.append(Pair(a.name, b.name, figure, identical, _lines(a.source, runs[a.name], both),
                              _lines(b.source, runs[b.name], both)))
    pairs.sort(key=lambda p: (-p.identical, -p.similarity, p.a, p.b))
    return tuple(pairs[:MAX_PAIRS])


def _lines(source: bytes, runs: list[tuple[int, int, int]], common: set[int]) -> tuple[tuple[int, str, bool], ...]:
    """Every line of the file, marked where a run the other file shares covers it."""
    shared = set()
    for h, first, last in runs:
        if h in common:
            shared.update(range(first, last + 1))
    return tuple((n, line, n in shared) for n, line in enumerate(_decoded(source).splitlines(), 1))


def _decoded(source: bytes) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"
    return source.decode(encoding, errors="replace")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
