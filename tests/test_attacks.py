"""The attack suite: hostile submissions run through the real CLI against the real sandboxes.

Each file in tests/submissions/attacks is a submission whose attack sits between `# attack-begin`
and `# attack-end` lines; without them it is an honest submission. For every attack and every
sandbox it names (`# sandboxes: local docker`):
- the score is no more than the honest version's (graded in the same session, not written down);
- the grade finishes within its time limit, with a result (exit status 0);
- nothing of the grade is left running (no grader process, no process the attack marked, no
  container);
- no file outside the sandbox's scratch space appeared or changed, in the places attacks aim at:
  the project, the installed exercise, site-packages, the home folder, the temp folder, and the
  platforms' result folders;
- nothing the student wrote reaches the grader's screen or the result raw: no escape sequence, no
  other C0 or C1 control character, no bidirectional override, no lone surrogate, in the terminal
  text or any string of the result JSON; and no "Sandbox note" is one the submission forged (an
  attack marks its forgeries FORGED).
A file with a `# diagnosed: ID ...` line must also have each of these bug ids named in its result
when it is graded (the delegation attacks: `uses_forbidden_builtin`).
A file with a `# known-hole:` line is an attack the grader does not stop yet: its case is an
expected failure (xfail, strict), so the run shows it as such and never as passed.
The conftest prints the table of outcomes at the end of the run.
"""
from __future__ import annotations

import os
import re
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SUBMISSIONS, grade

ATTACKS = SUBMISSIONS / "attacks"
TIME_LIMIT_S = 90 + 15            # the exercise's wall clock, plus start-up and the CLI's own work
WATCHED = [ROOT, ROOT / "exercise" / "causal_self_attention", ROOT / "exercise" / "causal_self_attention" / "tests",
           Path(sysconfig.get_paths()["purelib"]), Path.home(), Path(tempfile.gettempdir()),
           Path("/autograder"), Path("/autograder/results"), Path("/grade"), Path("/grade/results"), Path("/")]
OUR_PROCESSES = ("sandbox.harness", "sandbox.zygote", "sandbox.container", "attack-daemon")
# What must never reach a screen or a result file raw (written out here, not taken from the grader).
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def raw_text(result: dict | None, terminal: str) -> list[str]:
    """The strings of the terminal text and the result that hold a character of RAW."""
    found = [terminal] if RAW.search(terminal.replace("\r\n", "\n")) else []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                walk(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and RAW.search(node):
            found.append(node)
    walk(result)
    return [repr(text[:300]) for text in found]


def attack_header(path: Path) -> tuple[str, list[str]]:
    text = path.read_text()
    what = re.search(r"^# attack: (.+)$", text, re.M)
    where = re.search(r"^# sandboxes: (.+)$", text, re.M)
    assert what and where, f"{path.name} lacks its '# attack:' or '# sandboxes:' line"
    return what.group(1), where.group(1).split()


def honest_source(path: Path) -> str:
    """The submission without its attack blocks."""
    kept, inside = [], False
    for line in path.read_text().splitlines(keepends=True):
        marker = line.strip()
        if marker == "# attack-begin":
            assert not inside, f"{path.name}: nested attack-begin"
            inside = True
        elif marker == "# attack-end":
            assert inside, f"{path.name}: attack-end without attack-begin"
            inside = False
        elif not inside:
            kept.append(line)
    assert not inside, f"{path.name}: attack-begin without attack-end"
    return "".join(kept)


def cases():
    for path in sorted(ATTACKS.glob("*.py")):
        hole = re.search(r"^# known-hole: (.+)$", path.read_text(), re.M)
        for sandbox in attack_header(path)[1]:
            marks = [pytest.mark.docker] if sandbox == "docker" else []
            if hole:  # reported as xfailed, never as passed; strict: a fix makes it fail until the line goes
                marks.append(pytest.mark.xfail(reason=f"known hole: {hole.group(1)}", strict=True))
            yield pytest.param(path, sandbox, id=f"{path.stem}-{sandbox}", marks=marks)


def snapshot() -> dict[str, tuple]:
    """Every entry of the watched folders (not recursive), with its kind, size and mtime."""
    seen = {}
    for folder in WATCHED:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            seen[str(folder)] = ("absent",)
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            # a folder's own mtime changes whenever anything (pytest included) adds a file in it
            seen[entry.path] = ("dir",) if is_dir else ("file", st.st_size, st.st_mtime_ns)
    return seen


def running() -> set[str]:
    """Command lines of processes that belong to a grade or to an attack."""
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(mark in cmd for mark in OUR_PROCESSES):
                found.add(f"{pid}: {cmd[:200]}")
    return found


def docker_leftovers() -> list[str]:
    import docker
    client = docker.from_env()
    return [c.name for c in client.containers.list(all=True, filters={"label": "attention-grader"})]


@pytest.fixture(scope="session")
def honest_score(tmp_path_factory):
    cache: dict[str, float] = {}

    def score(path: Path) -> float:
        source = honest_source(path)
        if source not in cache:
            honest = tmp_path_factory.mktemp("honest") / path.name
            honest.write_text(source)
            graded = grade(honest)
            assert graded.exit_code == 0 and graded.result["status"] in ("graded", "rejected"), \
                f"the honest version of {path.name} did not grade: {graded.terminal[-2000:]}"
            cache[source] = graded.result["score"]
        return cache[source]
    return score


def test_the_corpus_has_at_least_15_distinct_attacks():
    assert len(list(ATTACKS.glob("*.py"))) >= 15
    for path in ATTACKS.glob("*.py"):
        assert honest_source(path) != path.read_text(), f"{path.name} has no attack block"


@pytest.mark.parametrize("path,sandbox", list(cases()))
def test_attack_gains_nothing_and_leaves_nothing(path, sandbox, honest_score, attack_outcomes):
    ceiling = honest_score(path)
    before_files, before_procs = snapshot(), running()
    graded = grade(path, "--sandbox", sandbox, timeout=TIME_LIMIT_S + 60)
    after_procs = running() - before_procs
    for _ in range(20):  # a PID namespace's processes die with it, a moment after the grade ends
        if not after_procs:
            break
        time.sleep(0.1)
        after_procs = running() - before_procs
    after_files = snapshot()
    changed = sorted(k for k in {*before_files, *after_files} if before_files.get(k) != after_files.get(k))
    result = graded.result or {}
    outcome = {"attack": path.stem, "sandbox": sandbox, "status": result.get("status"),
               "score": result.get("score"), "honest": ceiling, "seconds": graded.seconds}
    attack_outcomes.append(outcome)
    assert graded.exit_code == 0 and result.get("status") in ("graded", "rejected"), \
        f"no result: exit {graded.exit_code}\n{graded.terminal[-3000:]}"
    assert result["score"] <= ceiling + 1e-6, f"scored {result['score']} above its honest {ceiling}"
    assert not raw_text(result, graded.terminal), f"raw student text reached the output: {raw_text(result, graded.terminal)}"
    assert not [n for n in result.get("notes", []) if "FORGED" in n], f"forged notes shown: {result['notes']}"
    diagnosed = re.search(r"^# diagnosed: (.+)$", path.read_text(), re.M)
    if diagnosed:
        assert result["status"] == "graded", f"{path.name} must be graded to show its diagnosis"
        named = {b["id"] for b in result.get("bugs") or ()}
        assert set(diagnosed.group(1).split()) <= named, f"the result names {sorted(named)}"
    assert graded.seconds < TIME_LIMIT_S
    assert not after_procs, f"left running: {after_procs}"
    assert not changed, f"files changed outside the sandbox: {changed}"
    if sandbox == "docker":
        assert docker_leftovers() == []
    outcome["outcome"] = "held"
