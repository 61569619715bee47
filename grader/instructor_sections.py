"""The class report's instructor sections: clusters of unexplained mistakes, and similar
submissions with their shared lines side by side. HTML only, escaped, without script (what the
class report promises); the facts come from grader.clusters and grader.similarity.
"""
from __future__ import annotations

import ast
import difflib
import functools
import hashlib
import html
import io
import tokenize
from dataclasses import dataclass


def _anchor(name: str) -> str:
    """An id for a submission's row, from any name: what the report's sections link to."""
    return hashlib.sha256(name.encode(errors="surrogatepass")).hexdigest()[:12]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


MAX_EVIDENCE = 1200
SIDE_BY_SIDE = 3      # members of a cluster whose code is shown next to each other
CONTEXT = 2           # unchanged lines shown around each changed part
MAX_SHOWN_LINES = 40  # of one member's code, when there is no full-marks code to read it against
CLOSE = 0.6           # share of lines in common from which full-marks code is close enough to read against
CANDIDATES = 12       # members of a cluster read, to show the SIDE_BY_SIDE read best (bounds the work)


@dataclass(frozen=True)
class ClassCode:
    """The code the cluster section reads: each submission's, by its shown name, and the names of
    the graded submissions with full marks (the reference a member's code is read against: the
    one closest to it, so that only what differs in substance stands out)."""
    by_name: dict[str, str]
    full_marks: tuple[str, ...] = ()


def source_text(source: bytes) -> str:
    """Python source as text, in the encoding it declares (UTF-8 by default); what cannot be
    decoded is shown as the replacement character."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        return source.decode(encoding, "replace")
    except LookupError:
        return source.decode("utf-8", "replace")


def cluster_anchor(cluster_id: str) -> str:
    """The id of a cluster's part of the report (a cluster id is hex: safe in a URL fragment)."""
    return f"cluster-{_anchor(cluster_id)}"


def clusters_section(clusters, code: ClassCode | None = None) -> str:
    head = '<h2 id="clusters">Unexplained mistakes, by behaviour</h2>'
    if not clusters:
        return head + '<p class="muted">Every submission that lost points has a named mistake.</p>'
    code = code or ClassCode({})
    out = [head, ('<p class="muted">Submissions that lose points while no mistake in the catalog is named, grouped '
                  "by the same failing cases and the same differences on the diagnosis probes. Each cluster shows "
                  "its members' code side by side, the lines that differ from the closest full-marks code of the "
                  "class highlighted. Read one, then name the cluster in the course file and rescore: every member "
                  "gets your feedback.</p>")]
    for number, c in enumerate(clusters, 1):
        out.append(_cluster(number, c, code))
    return "".join(out)


def _cluster(number: int, c, code: ClassCode) -> str:
    # the members read best against full-marks code first: their marks show the mistake itself
    read = sorted(((m, _read_against(code.by_name[m], code)) for m in
                   [m for m in c.members if m in code.by_name][:CANDIDATES]),
                  key=lambda mv: (not mv[1].reference, -mv[1].closeness, mv[0]))[:SIDE_BY_SIDE]
    shown, views = [m for m, _ in read], [v for _, v in read]
    changed = next((line for view in views for line in view.changed), "")
    students = f"{c.size} student{'s' if c.size != 1 else ''}"
    where = f" in {_and([f'“{_e(t)}”' for t in c.failing])}" if c.failing else ""
    if changed:
        how = f"; where {'their' if c.size > 1 else 'its'} code departs from the closest full-marks code: <code>{_e(changed)}</code>"
    elif views:
        how = "; no full-marks code of this class is close enough to read theirs against"
    else:
        how = ""
    lose = "loses" if c.size == 1 else "lose"
    alike = "" if c.size == 1 else ", all alike on every probe"
    sentence = (f"<p><b>{_e(c.name)}</b> · {students} {lose} points{where}{how}.</p>" if c.name else
                f"<p>{students.capitalize()} {lose} points{where}{alike}{how}.</p>")
    named = (f'<p class="fix">Fix given to the students: {_e(c.fix)}</p>' if c.name else
             '<details><summary>name it in the course file</summary>'
             f'<pre class="snippet">[clusters.{_e(c.id)}]\ntitle = "..."\nfix = "..."</pre></details>')
    columns = "".join(f'<div><div class="who">{_link(m)}'
                      + (f' <span class="muted">read against {_link(view.reference)}</span>' if view.reference
                         else ' <span class="muted">unlike any full-marks code: not marked</span>')
                      + f"</div>{view.html}</div>" for m, view in zip(shown, views))
    grid = (f'<div class="cl" style="grid-template-columns:repeat({len(views)},minmax(0,1fr))">{columns}</div>'
            if views else "")
    evidence = c.evidence if len(c.evidence) <= MAX_EVIDENCE else c.evidence[:MAX_EVIDENCE] + "…"
    probes = (f'<details><summary>what the diagnosis saw on its probes</summary><div class="evidence">{_e(evidence)}'
              "</div></details>" if evidence else "")
    members = ", ".join(_link(m) for m in c.members)
    return (f'<section class="cluster" id="{cluster_anchor(c.id)}"><h3>Cluster {number} '
            f'<code class="muted">{_e(c.id)}</code></h3>{sentence}{named}{grid}{probes}'
            f"<details><summary>{'all ' if c.size > 1 else ''}{c.size} member{'s' if c.size > 1 else ''}</summary>"
            f"{members}</details></section>")


def _and(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(frozen=True)
class _View:
    html: str
    changed: tuple[str, ...]   # the changed lines, as written (stripped)
    reference: str = ""        # the full-marks submission it was read against
    closeness: float = 0.0     # the share of lines it has in common with it


def _read_against(source: str, code: ClassCode) -> _View:
    """The member's code with the lines that differ from the closest full-marks code marked,
    shown around those lines only; without full-marks code, its first lines unmarked."""
    lines = source.splitlines()
    mine = _meaning(source)
    best, reference, best_ratio = None, "", 0.0
    for name in code.full_marks:
        other = code.by_name.get(name)
        if other is None or other == source:
            continue
        matcher = difflib.SequenceMatcher(None, _meaning(other), mine, autojunk=False)
        # the quick upper bounds first: most of a large class's full-marks code is not the closest
        if best is None or (matcher.real_quick_ratio() > best_ratio and matcher.quick_ratio() > best_ratio
                            and matcher.ratio() > best_ratio):
            best, reference, best_ratio = matcher, name, matcher.ratio()
    if best is None or best.ratio() < CLOSE:  # written another way: every line would be marked
        keep = set(range(min(len(lines), MAX_SHOWN_LINES)))
        return _View(_listing(lines, keep, set()), (), closeness=best.ratio() if best else 0.0)
    changed = {j for tag, _, _, j1, j2 in best.get_opcodes() if tag in ("replace", "insert")
               for j in range(j1, j2) if mine[j]}
    keep = {k for j in changed for k in range(j - CONTEXT, j + CONTEXT + 1) if 0 <= k < len(lines)}
    return _View(_listing(lines, keep, changed), tuple(lines[j].strip() for j in sorted(changed)), reference,
                 best.ratio())


def _listing(lines: list[str], keep: set[int], changed: set[int]) -> str:
    out, last = [], -1
    for i in sorted(keep):
        if i > last + 1:
            out.append('<span class="gap">⋮\n</span>')
        text = f'<span class="ln">{i + 1:>3} </span>{_e(lines[i])}\n'
        out.append(f'<span class="diff">{text}</span>' if i in changed else text)
        last = i
    if last < len(lines) - 1:
        out.append('<span class="gap">⋮\n</span>')
    return f"<pre>{''.join(out)}</pre>"


@functools.lru_cache(maxsize=1024)  # each full-marks file is read against every cluster's members
def _meaning(source: str) -> tuple[str, ...]:
    """Each line as it counts when code is compared: comments, docstrings and spacing set aside
    (a line of only those is ''). Code Python cannot read is compared line by line as written."""
    lines = source.splitlines()
    out = [" ".join(line.split()) for line in lines]
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, ValueError, tokenize.TokenError):
        return tuple(out)
    for node in ast.walk(tree):  # docstrings
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            for n in range(first.lineno, (first.end_lineno or first.lineno) + 1):
                out[n - 1] = ""
    for tok in tokens:  # comments: cut from where they start
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            out[row - 1] = " ".join(lines[row - 1][:col].split()) if out[row - 1] else ""
    return tuple(out)


def similar_section(similar) -> str:
    """`similar`: grader.similarity.Findings (or its pairs): the pairs the cap lets through, and a
    notice of those it cut (similar.csv has them all)."""
    from grader.similarity import MAX_PAIRS, Origin
    pairs = tuple(similar.pairs) if hasattr(similar, "pairs") else tuple(similar)
    head = '<h2 id="similar">Similar submissions</h2>'
    note = ('<p class="muted">Pairs whose code is much alike once names, comments, layout, dead code, the order '
            "of independent statements and equivalent tensor ops are set aside, and the exercise's starter code "
            "and the class's common boilerplate left out; also pairs with an earlier term's submissions and "
            "with library source that implements the exercise. A signal for a person to look at, never a "
            "penalty: the score is not changed. All pairs are in similar.csv and similar.json.</p>")
    if not pairs:
        return head + note + '<p class="muted">No two submissions are much alike.</p>'
    out = [head, note]
    if len(pairs) > MAX_PAIRS:
        out.append(f'<p><b>Showing the {MAX_PAIRS} most alike of {len(pairs)} pairs</b>: '
                   f"{len(pairs) - MAX_PAIRS} more are in similar.csv.</p>")
    out.append('<table><tr><th class="num">Alike</th><th>Submissions</th></tr>')
    for i, p in enumerate(pairs[:MAX_PAIRS]):
        flag = f'<span class="badge flag">{_e(p.note)}</span> ' if getattr(p, "note", "") else (
            '<span class="badge flag">identical files</span> ' if p.identical else "")
        other = _link(p.b) if getattr(p, "origin", Origin.CLASS) is Origin.CLASS else f"<code>{_e(p.b)}</code>"
        out.append(f'<tr><td class="num">{p.similarity:.0%}</td><td>{flag}'
                   f'{_link(p.a)} and {other}'
                   f'<details{" open" if i == 0 else ""}><summary>shared lines, side by side</summary>'
                   f'<div class="sbs">'
                   f"{_code(p.lines_a)}{_code(p.lines_b)}</div></details></td></tr>")
    return "".join(out) + "</table>"


def _link(name: str) -> str:
    """A submission's name, linking to its row in the report's list of submissions."""
    return f'<a href="#s-{_e(_anchor(name))}"><code>{_e(name)}</code></a>'


def _code(lines) -> str:
    body = "".join(f'<span class="{"same" if shared else ""}"><span class="ln">{n:>3} </span>{_e(text)}\n</span>'
                   if shared else f'<span class="ln">{n:>3} </span>{_e(text)}\n' for n, text, shared in lines)
    return f"<pre>{body}</pre>"
