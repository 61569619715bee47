"""What must never reach a screen or a result file raw: characters that print nothing."""
from __future__ import annotations

import re
import unicodedata

# What must never reach a screen or a result file raw (written out here, not taken from the grader):
# every character that prints nothing, by its Unicode category (controls but newline and tab,
# format characters such as the bidi controls, zero-width spaces, the soft hyphen, tag characters
# and the BOM; surrogates, private use, unassigned; the line and paragraph separators), and the
# fillers and variation selectors that print nothing though Unicode calls them letters or marks.
FILLERS = re.compile("[\u034f\u115f\u1160\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def hidden(text: str) -> bool:
    """Whether `text` holds a character that prints nothing (see FILLERS)."""
    return any((unicodedata.category(ch)[0] == "C" and ch not in "\n\t") or unicodedata.category(ch) in ("Zl", "Zp")
               for ch in text if not ("\x20" <= ch <= "\x7e")) or bool(FILLERS.search(text))


def raw_text(result: dict | None, terminal: str) -> list[str]:
    """The strings of the terminal text and the result that hold a character that prints nothing."""
    found = [terminal] if hidden(terminal.replace("\r\n", "\n")) else []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                walk(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and hidden(node):
            found.append(node)
    walk(result)
    return [repr(text[:300]) for text in found]
