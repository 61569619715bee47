"""The attack suite: hostile submissions run through the real CLI against the real sandboxes.

Each file in tests/submissions/attacks (and, for the single-head exercise, tests/submissions/head/
attacks) is a submission whose attack sits between `# attack-begin` and `# attack-end` lines; without
them it is an honest submission. A `# exercise: NAME` line grades it (and its honest version) as that
exercise. For every attack and every sandbox it names (`# sandboxes: local docker`):
- the score is no more than the honest version's (graded in the same session, not written down);
- the grade finishes within its time limit, with a result (exit status 0);
- nothing of the grade is left running (no grader process, no process the attack marked, no
  container);
- no file outside the sandbox's scratch space appeared or changed, in the places attacks aim at:
  the project, the installed exercise, site-packages, the grade's home and temp folders, and the
  platforms' result folders;
- nothing the student wrote reaches the grader's screen or the result raw: no escape sequence, no
  other C0 or C1 control character, no bidirectional override, no lone surrogate, in the terminal
  text or any string of the result JSON; and no "Sandbox note" is one the submission forged (an
  attack marks its forgeries FORGED).
Each grade runs with a temp folder (TMPDIR) and a home folder of its own, made here: the local
sandbox makes its scratch space, the grade's temporary root, inside that TMPDIR, and those two are
what is watched, not the machine's /tmp or home, which anything else on the machine may write to
while the suite runs (the student's code may write in neither: Landlock).
A file with a `# diagnosed: ID ...` line must also have each of these bug ids named in its result
when it is graded (the delegation attacks: `uses_forbidden_builtin`).
A file with a `# known-hole:` line is an attack the grader does not stop yet: its case is an
expected failure (xfail, strict), so the run shows it as such and never as passed.
The conftest prints the table of outcomes at the end of the run.
"""
from __future__ import annotations

import os
import re
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SUBMISSIONS, grade, own_label

ATTACKS = SUBMISSIONS / "attacks"
HEAD_ATTACKS = SUBMISSIONS / "head" / "attacks"
TIME_LIMIT_S = 90 + 15            # the exercise's wall clock, plus start-up and the CLI's own work
WATCHED = [ROOT, ROOT / "exercise" / "causal_self_attention", ROOT / "exercise" / "causal_self_attention" / "tests",
           ROOT / "exercise" / "causal_attention_head", ROOT / "exercise" / "causal_attention_head" / "tests",
           Path(sysconfig.get_paths()["purelib"]), Path("/autograder"), Path("/autograder/results"), Path("/grade"),
           Path("/grade/results"), Path("/")]
OUR_PROCESSES = ("sandbox.harness", "sandbox.zygote", "sandbox.container")
ATTACK_MARK = "attack-daemon"     # a process an attack started, whatever its environment
# The host's key for the grades' seeds (grader.keys), given as a course gives it: the attack and its
# honest twin are graded with the draws of one key, and no key file is made in the grade's home.
SEED = {"ATTENTION_GRADER_SEED_KEY": f"attack suite {os.urandom(8).hex()}"}
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


def exercise_args(path: Path) -> list[str]:
    """The CLI options that grade this attack as its exercise (none: the default exercise)."""
    named = re.search(r"^# exercise: (\S+)$", path.read_text(), re.M)
    return ["--exercise", named.group(1)] if named else []


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
    for path in sorted(ATTACKS.glob("*.py")) + sorted(HEAD_ATTACKS.glob("*.py")):
        prefix = "head-" if path.parent == HEAD_ATTACKS else ""
        hole = re.search(r"^# known-hole: (.+)$", path.read_text(), re.M)
        for sandbox in attack_header(path)[1]:
            marks = [pytest.mark.docker] if sandbox == "docker" else []
            if hole:  # reported as xfailed, never as passed; strict: a fix makes it fail until the line goes
                marks.append(pytest.mark.xfail(reason=f"known hole: {hole.group(1)}", strict=True))
            yield pytest.param(path, sandbox, id=f"{prefix}{path.stem}-{sandbox}", marks=marks)


def snapshot(*also: Path) -> dict[str, tuple]:
    """Every entry of the watched folders and of `also` (not recursive), with its kind, size and mtime."""
    seen = {}
    for folder in [*WATCHED, *also]:
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


def running(own: Path, mark: str = ATTACK_MARK) -> set[str]:
    """Command lines of processes that belong to this grade or to its attack: a process the attack
    marked (with this grade's own `mark`), or a grader process whose environment names the grade's
    own folders (every process of a local grade inherits them), not those of other grades running on
    the machine meanwhile."""
    found = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if mark in cmd or any(ours in cmd for ours in OUR_PROCESSES) \
                        and str(own).encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    found.add(f"{pid}: {cmd[:200]}")
            except OSError:
                continue
    return found


def docker_leftovers() -> list[str]:
    """Grading containers this test session made (its owner label) that are still there: other
    grades on the machine make their own, which come and go meanwhile."""
    import docker

    from sandbox.docker import DockerSandbox
    client = docker.from_env()
    image = DockerSandbox().image
    return [c.name for c in client.containers.list(all=True, filters=own_label())
            if c.attrs.get("Config", {}).get("Image") == image]


@pytest.fixture(scope="session")
def honest_score(tmp_path_factory):
    cache: dict[str, float] = {}

    def score(path: Path) -> float:
        source = honest_source(path)
        key = (source, *exercise_args(path))
        if key not in cache:
            honest = tmp_path_factory.mktemp("honest") / path.name
            honest.write_text(source)
            graded = grade(honest, *exercise_args(path), env=SEED)
            assert graded.exit_code == 0 and graded.result["status"] in ("graded", "rejected"), \
                f"the honest version of {path.name} did not grade: {graded.terminal[-2000:]}"
            cache[key] = graded.result["score"]
        return cache[key]
    return score


def test_the_corpus_has_at_least_15_distinct_attacks():
    assert len(list(ATTACKS.glob("*.py"))) >= 15
    for path in ATTACKS.glob("*.py"):
        assert honest_source(path) != path.read_text(), f"{path.name} has no attack block"


@pytest.mark.parametrize("path,sandbox", list(cases()))
def test_attack_gains_nothing_and_leaves_nothing(path, sandbox, honest_score, attack_outcomes):
    ceiling = honest_score(path)
    own = Path(tempfile.mkdtemp(prefix="attack-grade-"))   # this grade's own temp and home folders
    places = {"TMPDIR": own / "tmp", "HOME": own / "home"}
    for place in places.values():
        place.mkdir()
    before_files = snapshot(*places.values())
    before_containers = set(docker_leftovers()) if sandbox == "docker" else set()
    # The attack's processes carry a mark of this grade's own: another run's daemons are not ours.
    mark = f"{ATTACK_MARK}-{os.urandom(4).hex()}"
    (own / "upload").mkdir()
    marked = own / "upload" / path.name
    marked.write_text(path.read_text().replace(ATTACK_MARK, mark))
    graded = grade(marked, "--sandbox", sandbox, *exercise_args(path), timeout=TIME_LIMIT_S + 60,
                   env={**{k: str(v) for k, v in places.items()}, **SEED})
    after_procs = running(own, mark)
    for _ in range(20):  # a PID namespace's processes die with it, a moment after the grade ends
        if not after_procs:
            break
        time.sleep(0.1)
        after_procs = running(own, mark)
    after_files = snapshot(*places.values())
    shutil.rmtree(own, ignore_errors=True)
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
    if sandbox == "docker":  # containers of this grade: none that other grades on the machine started
        assert set(docker_leftovers()) - before_containers == set()
    outcome["outcome"] = "held"
