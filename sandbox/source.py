"""Where a line of the graded script came from: the file itself, or a cell of a notebook."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CellSpan:
    """Lines `first`..`first + count - 1` of the script are lines 1..count of code cell `cell`."""
    first: int
    count: int
    cell: int


@dataclass(frozen=True)
class LineMap:
    """Maps script lines to what the student wrote; empty for a plain .py file."""
    spans: tuple[CellSpan, ...] = ()

    @classmethod
    def from_list(cls, raw) -> LineMap:
        return cls(tuple(CellSpan(int(a), int(b), int(c)) for a, b, c in raw or ()))

    def to_list(self) -> list[list[int]]:
        return [[s.first, s.count, s.cell] for s in self.spans]

    def place(self, line: int) -> str:
        """'line 12', or 'cell 3, line 4' for a notebook."""
        for span in self.spans:
            if span.first <= line < span.first + span.count:
                return f"cell {span.cell}, line {line - span.first + 1}"
        return f"line {line}"

    def describe(self, source_lines: list[str]):
        """A function that names a script line and quotes it: "line 12: q = q.view(B, T, C)"."""
        def locate(line: int) -> str:
            code = source_lines[line - 1].strip() if 0 < line <= len(source_lines) else ""
            return f"{self.place(line)}: {code}" if code else self.place(line)
        return locate


def python_lines(source: bytes) -> list[str]:
    r"""The source's lines as Python numbers them: decoded as Python decodes it, and split only
    at \n, \r\n and \r (str.splitlines() also splits at form feeds, \x1c-\x1e, \x85 and
    \u2028, which Python leaves inside a line)."""
    import io
    import tokenize
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        text = source.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return []
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
