"""The class report's instructor sections: clusters of unexplained mistakes, and similar
submissions with their shared lines side by side. HTML only, escaped, without script (what the
class report promises); the facts come from grader.clusters and grader.similarity.
"""
from __future__ import annotations

import hashlib
import html


def _anchor(name: str) -> str:
    """An id for a submission's row, from any name: what the report's sections link to."""
    return hashlib.sha256(name.encode(errors="surrogatepass")).hexdigest()[:12]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


MAX_EVIDENCE = 1200


def clusters_section(clusters) -> str:
    head = '<h2 id="clusters">Unexplained mistakes, by behaviour</h2>'
    if not clusters:
        return head + '<p class="muted">Every submission that lost points has a named mistake.</p>'
    out = [head, ('<p class="muted">Submissions that lose points while no mistake in the catalog is named, '
                  "grouped by the same failing cases and the same differences on the diagnosis probes. Read one, "
                  "then name the cluster in the course file and rescore: every member gets your feedback.</p>"),
           '<table><tr><th class="num">Students</th><th>Cluster</th><th>Representative and evidence</th></tr>']
    for c in clusters:
        evidence = c.evidence if len(c.evidence) <= MAX_EVIDENCE else c.evidence[:MAX_EVIDENCE] + "…"
        named = (f"<b>{_e(c.name)}</b><br><span class=\"fix\">{_e(c.fix)}</span>" if c.name else
                 f'<span class="muted">not named yet; in the course file:</span><br>'
                 f'<code>[clusters.{_e(c.id)}]<br>title = "..."<br>fix = "..."</code>')
        members = ", ".join(_link(m) for m in c.members)
        out.append(f'<tr><td class="num">{c.size}</td><td><code>{_e(c.id)}</code><br>{named}</td>'
                   f'<td>{_link(c.members[0])}'
                   f'<span class="muted"> loses points in: {_e("; ".join(c.failing))}</span>'
                   f'<div class="evidence">{_e(evidence)}</div>'
                   f'<details><summary>all {c.size}</summary>{members}</details></td></tr>')
    return "".join(out) + "</table>"


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
