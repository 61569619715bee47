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
A file with a `# call-limit: SECONDS` line, one whose calls never return (a loop, a recursion
without end), is graded with the host's lower limit on one call (grader.grading.CALL_LIMIT): the
kill, the count of timed-out calls and the clean-up are what it meets at 1 s as at 4, in a third
of the time. The deployed limit's value is checked by test_pure.py.
An attack on the score is graded as a class is, in a warm `grade batch` with the other attacks
of its chunk, and the batch is watched as a cold grade is (see warm_batch); so is its run with the
kernel's layers alone, in a batch of those runs. An attack marked `# path: cold`, or graded by an
ordinary user, goes through `grade FILE`, the cold path, one grade per test. The table shows which
path each took.
The conftest prints the table of outcomes at the end of the run.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from grader.grading import CALL_LIMIT
from tests.support.as_user import NOBODY
from tests.support.grading import KERNEL_LAYER, ROOT, SUBMISSIONS, grade, own_label
from tests.support.batching import batch
from tests.support.printable import raw_text
from tests.support.corpus import Corpus, chunk_of
from tests.support.shared import once

ATTACKS = SUBMISSIONS / "attacks"
HEAD_ATTACKS = SUBMISSIONS / "head" / "attacks"
TIME_LIMIT_S = 90 + 15            # the exercise's wall clock, plus start-up and the CLI's own work
WATCHED = [ROOT, ROOT / "sandbox", ROOT / "grader", ROOT / "exercise", ROOT / "exercise" / "causal_self_attention", ROOT / "exercise" / "causal_self_attention" / "tests",
           ROOT / "exercise" / "causal_attention_head", ROOT / "exercise" / "causal_attention_head" / "tests",
           Path(sysconfig.get_paths()["purelib"]), Path("/autograder"), Path("/autograder/results"), Path("/grade"),
           Path("/grade/results"), Path("/")]
OUR_PROCESSES = ("sandbox.harness", "sandbox.zygote", "sandbox.container", "sandbox.warm_server")  # a warm zygote is a fork of its server
ATTACK_MARK = "attack-daemon"     # a process an attack started, whatever its environment
# The host's key for the grades' seeds (grader.keys), given as a course gives it: the attack and its
# honest twin are graded with the draws of one key, and no key file is made in the grade's home.
SEED = {"ATTENTION_GRADER_SEED_KEY": f"attack suite {os.urandom(8).hex()}"}


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
    """(path, sandbox, uid, kernel) per attack and sandbox it names; uid None: as the suite's own user
    (root on CI); an attack with '# as-user: yes' is also graded by an ordinary user (tests.as_user),
    in the local sandbox, when the suite runs as root. An attack with '# layers: kernel' aims at the
    kernel's layers (processes, limits, foreign code): it is graded as deployed, where the audit
    layer refuses its route, and again with the kernel's layers alone (kernel True), so that both
    layers are seen to hold on their own."""
    for path in all_attacks():
        prefix = "head-" if path.parent == HEAD_ATTACKS else ""
        text = path.read_text()
        hole = re.search(r"^# known-hole: (.+)$", text, re.M)
        sandboxes = attack_header(path)[1]
        runs = [(sandbox, None) for sandbox in sandboxes]
        if re.search(r"^# as-user: yes$", text, re.M) and os.geteuid() == 0:
            runs.append(("local", NOBODY))
        runs = [(sandbox, uid, False) for sandbox, uid in runs]
        if aims_at_kernel(path):
            runs += [(sandbox, None, True) for sandbox in sandboxes]
        for sandbox, uid, kernel in runs:
            marks = [pytest.mark.docker] if sandbox == "docker" else []
            if uid is None and not cold_only(path):
                marks.append(pytest.mark.warm)
            if hole:  # reported as xfailed, never as passed; strict: a fix makes it fail until the line goes
                marks.append(pytest.mark.xfail(reason=f"known hole: {hole.group(1)}", strict=True))
            user = "-user" if uid is not None else "-kernel" if kernel else ""
            yield pytest.param(path, sandbox, uid, kernel, id=f"{prefix}{path.stem}-{sandbox}{user}", marks=marks)


class Bait:
    """What the host attacks aim at, made for one grade outside its sandbox (the '@BAIT@' of an
    attack's text): a file only its owner may read, a file to change the metadata of (with an
    extended attribute to remove), a listening pathname socket and an abstract one. Owned by the
    user who grades, so that only the sandbox, not the file's owner, stands in the way."""

    def __init__(self, folder: Path, uid: int):
        import socket
        import threading
        self.folder, self.connections = folder, []
        folder.mkdir()
        (folder / "secret.txt").write_text("BAIT-SECRET " + os.urandom(8).hex())
        os.chmod(folder / "secret.txt", 0o600)
        (folder / "open.txt").write_text("a file to leave alone")
        os.setxattr(folder / "open.txt", "user.kept", b"the test's")
        self.listeners = []
        for address in (str(folder / "service.sock"), "\0" + str(folder).replace("/", "-") + "-abstract"):
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(address)
            listener.listen(8)
            listener.settimeout(0.2)
            self.listeners.append(listener)
        for path in (folder, *folder.iterdir()):
            os.chown(path, uid, uid, follow_symlinks=False)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            for listener in self.listeners:
                try:
                    conn, _ = listener.accept()
                    self.connections.append(listener.getsockname())
                    conn.close()
                except OSError:
                    continue

    def close(self) -> list:
        self._stop.set()
        self.thread.join(2)
        for listener in self.listeners:
            listener.close()
        return self.connections


def planted(text: str, mark: str, bait: Bait | None) -> str:
    """An attack's text as one grade runs it: the processes it starts carry the grade's own mark,
    and its '@BAIT@' is the grade's bait folder."""
    text = text.replace(ATTACK_MARK, mark)
    return text.replace("@BAIT@", str(bait.folder)) if bait else text


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
            try:
                attributes = tuple(sorted(os.listxattr(entry.path, follow_symlinks=False)))
            except OSError:
                attributes = ()
            owner = (st.st_mode, st.st_uid, st.st_gid, attributes)  # metadata: what Landlock does not govern
            # a folder's own mtime changes whenever anything (pytest included) adds a file in it
            seen[entry.path] = ("dir", *owner) if is_dir else ("file", st.st_size, st.st_mtime_ns, *owner)
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


def left_running(own: Path, mark: str) -> set[str]:
    """What still runs of a grade once it ended (running()), after the moment a PID namespace's
    processes take to die with it."""
    found = running(own, mark)
    for _ in range(20):
        if not found:
            break
        time.sleep(0.1)
        found = running(own, mark)
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


HEADER = re.compile(r"# (attack|sandboxes|path|honest|layers|call-limit|exercise|as-user|known-hole|diagnosed): ")


def honest_body(path: Path) -> str:
    """The honest version without the attack's header lines (comments that say how the suite runs
    it): attacks written on one honest layer share one body, graded once."""
    lines = honest_source(path).splitlines(keepends=True)
    while lines and HEADER.match(lines[0]):
        lines.pop(0)
    return "".join(lines)


def _honest_key(path: Path) -> str:
    return hashlib.sha256(honest_body(path).encode()).hexdigest()[:16] + ".py"


def _honest_corpora(seed: str) -> dict[tuple[str, ...], Corpus]:
    """The attacks' honest versions, by the options that grade them as their exercise: one file per
    distinct honest body (98 attacks, 54 bodies), named by its hash."""
    wanted: dict[tuple[str, ...], dict] = {}
    for path in all_attacks():
        wanted.setdefault(tuple(exercise_args(path)), {})[_honest_key(path)] = lambda path=path: honest_body(path)
    return {args: Corpus("honest-" + "-".join(args[1:] or ["default"]), files, args=args,
                         env={"ATTENTION_GRADER_SEED_KEY": seed}) for args, files in wanted.items()}


@pytest.fixture(scope="session")
def honest_score():
    """The score of each attack's honest version, graded in this run (never written down) by warm
    local batches, with the attacks' seed key, once for every worker (tests.support.corpus): each
    honest body gets the draws `grade FILE` would give it (the seed is the key's, of the bytes;
    an attack's own draws differ from its honest version's either way)."""
    # The seed key is drawn once per run: every worker grades its attacks with the key the honest
    # versions were graded with.
    SEED["ATTENTION_GRADER_SEED_KEY"] = once("attack-seed-key", lambda: SEED["ATTENTION_GRADER_SEED_KEY"])
    corpora = _honest_corpora(SEED["ATTENTION_GRADER_SEED_KEY"])

    def score(path: Path) -> float:
        result = corpora[tuple(exercise_args(path))].result(_honest_key(path))
        assert result["status"] in ("graded", "rejected"), \
            f"the honest version of {path.name} did not grade: {result.get('message')}"
        return result["score"]
    return score


# -- attacks on the score: warm batches -------------------------------------------------------------
# An attack on the score (what it earns, what the result says) is graded as a class is: in a warm
# `grade batch`, a chunk of attacks at a time, with the batch's own temp and home folders watched
# as a cold grade's are (files changed outside the sandbox, processes left running, containers
# left). Its test reads its own result from the batch. A batch that leaves something behind is
# graded again file by file, each in a batch of its own, so that the culprit's test fails by name.
# An attack marked `# path: cold` aims at what only the cold path has (the `grade` process, its
# terminal, its exit, the host beside it) and is graded by `grade FILE`, as are the attacks graded
# by an ordinary user (`grade batch` makes its sandbox as the user who runs it: the cold path is
# the one an ordinary user's course runs). An attack's run with the kernel's layers alone is graded
# warm too, in batches of those runs, unless it aims at the cold path.
WARM_CHUNK = 24


def cold_only(path: Path) -> bool:
    return re.search(r"^# path: cold\b", path.read_text(), re.M) is not None


def warm_batch(sandbox: str, args: tuple[str, ...], paths: list[Path], seed: str, honest: bool = False,
               kernel: bool = False) -> dict:
    """Grade `paths` in one warm batch, watched: {"results": by file name, "problems": [...]}, and
    "changed": the entries that changed in the batch's own temp and home folders and in the bait's
    (by their path in them). The grader's own processes outside the sandbox leave entries there in
    every batch (an honest one too: torch's cache folders): the changes a batch of honest versions
    makes in the same sandbox are not the attack's (`honest`: grade the honest versions, to learn
    those). `kernel`: with the kernel's layers alone, as the cold path's kernel runs are graded."""
    own = Path(tempfile.mkdtemp(prefix="attack-batch-"))
    places = {"TMPDIR": own / "tmp", "HOME": own / "home"}
    for place in places.values():
        place.mkdir()
    # One bait for the batch, as a cold grade has its own: the host attacks aim at it.
    bait = Bait(own / "bait", os.getuid()) if any("@BAIT@" in p.read_text() for p in paths) else None
    watched = [*places.values(), *([bait.folder] if bait else [])]
    before_files = snapshot(*watched)
    before_containers = set(docker_leftovers()) if sandbox == "docker" else set()
    mark = f"{ATTACK_MARK}-{os.urandom(4).hex()}"
    (own / "class").mkdir()
    names = {}
    for path in paths:
        names[path] = f"{path.parent.name}__{path.name}"
        (own / "class" / names[path]).write_text(planted(honest_source(path) if honest else path.read_text(), mark, bait))
    started = time.monotonic()
    run = batch(own / "class", own / "out", "--jobs", "2", "--sandbox", sandbox, *args,
                timeout=TIME_LIMIT_S * 3 + 60, env={**{k: str(v) for k, v in places.items()}, "ATTENTION_GRADER_SEED_KEY": seed,
                                                    **(KERNEL_LAYER if kernel else {})})
    seconds = time.monotonic() - started
    connected = bait.close() if bait else []
    after_procs = left_running(own, mark)
    after_files = snapshot(*watched)
    problems = []
    if run.exit_code != 0:
        problems.append(f"the batch exited {run.exit_code}: {run.output[-3000:]}")
    if raw_text(None, run.output):
        problems.append(f"raw student text reached the batch's terminal: {raw_text(None, run.output)}")
    if after_procs:
        problems.append(f"left running: {sorted(after_procs)}")
    if connected:
        problems.append(f"an attack connected to the bait's sockets: {connected}")
    relative = {str(place): name for name, place in {**places, **({"bait": bait.folder} if bait else {})}.items()}
    changed = sorted(re.sub(r"^(.*)/", lambda m: relative.get(m.group(1), m.group(1)) + "/", k)
                     for k in {*before_files, *after_files} if before_files.get(k) != after_files.get(k))
    # (the grader's own leavings do not depend on the layers in the student's process)
    allowed = set() if honest else set(once(f"attacks-warm-{sandbox}-{'-'.join(args) or 'default'}-honest",
                                            lambda: warm_batch(sandbox, args, paths[:1], seed, honest=True))["changed"])
    if set(changed) - allowed:
        problems.append(f"files changed outside the sandbox: {sorted(set(changed) - allowed)}")
    if sandbox == "docker" and set(docker_leftovers()) - before_containers:
        problems.append(f"containers left: {sorted(set(docker_leftovers()) - before_containers)}")
    results = {}
    if run.exit_code in (0, 1):
        for path, name in names.items():
            try:
                results[path.name] = run.result(name)
            except (KeyError, OSError) as err:
                problems.append(f"no result for {path.name}: {err!r}")
    shutil.rmtree(own, ignore_errors=True)
    return {"results": results, "problems": problems, "seconds": seconds, "changed": changed}


def warm_result(path: Path, sandbox: str, kernel: bool = False) -> tuple[dict, float, str | None]:
    """The attack's result from the warm batch of its chunk (graded once per run, on whichever
    worker asks first), or, where that batch left something behind, from a batch of its own."""
    seed = SEED["ATTENTION_GRADER_SEED_KEY"]
    args = tuple(exercise_args(path))
    same = warm_attacks(sandbox, args, kernel)
    k, chunk = chunk_of(same, same.index(path), WARM_CHUNK)
    layers = "-kernel" if kernel else ""
    made = once(f"attacks-warm-{sandbox}{layers}-{'-'.join(args) or 'default'}-{k}",
                lambda: warm_batch(sandbox, args, chunk, seed, kernel=kernel))
    if made["problems"]:
        chunk_problems = made["problems"]
        made = once(f"attacks-warm-{sandbox}{layers}-alone-{path.parent.name}-{path.name}",
                    lambda: warm_batch(sandbox, args, [path], seed, kernel=kernel))
        assert not made["problems"], "graded alone in a warm batch:\n" + "\n".join(made["problems"])
        # Not this attack's doing: its test passes, and the table says what its batch met.
        made = {**made, "note": "its batch: " + "; ".join(chunk_problems)[:300] + "; alone: nothing"}
    return made["results"][path.name], made["seconds"], made.get("note")


def all_attacks() -> list[Path]:
    return sorted(ATTACKS.glob("*.py")) + sorted(HEAD_ATTACKS.glob("*.py"))


@functools.cache
def warm_attacks(sandbox: str, args: tuple[str, ...], kernel: bool = False) -> list[Path]:
    """The attacks graded warm in this sandbox as this exercise (`kernel`: those graded again with
    the kernel's layers alone), in the order their chunks take."""
    return [p for p in all_attacks() if tuple(exercise_args(p)) == args and not cold_only(p)
            and sandbox in attack_header(p)[1] and (not kernel or aims_at_kernel(p))]


def call_limit(path: Path) -> dict[str, str]:
    """The host's lower limit on one call (grader.grading.CALL_LIMIT) for an attack whose calls never
    return ('# call-limit: SECONDS'): its grade waits that long per call instead of the exercise's 4 s.
    The deployed limit's value is checked by tests/test_pure.py."""
    named = re.search(r"^# call-limit: ([0-9.]+)\b", path.read_text(), re.M)
    return {CALL_LIMIT: named.group(1)} if named else {}


def aims_at_kernel(path: Path) -> bool:
    return re.search(r"^# layers: kernel$", path.read_text(), re.M) is not None


@pytest.mark.unit
def test_the_corpus_has_at_least_15_distinct_attacks():
    assert len(list(ATTACKS.glob("*.py"))) >= 15
    for path in ATTACKS.glob("*.py"):
        assert honest_source(path) != path.read_text(), f"{path.name} has no attack block"


@pytest.mark.parametrize("path,sandbox,uid,kernel", list(cases()))
def test_attack_gains_nothing_and_leaves_nothing(request, path, sandbox, uid, kernel, honest_score, attack_outcome):
    ceiling = honest_score(path)
    if request.node.get_closest_marker("warm"):
        result, seconds, note = warm_result(path, sandbox, kernel)
        attack_outcome.update({"attack": path.stem, "sandbox": sandbox + ("-kernel" if kernel else "") + "-warm",
                               "status": result.get("status"),
                               "score": result.get("score"), "honest": ceiling, "seconds": seconds})
        assert result.get("status") in ("graded", "rejected"), f"no result: {result.get('status')}: {result.get('message')}"
        assert_score_held(path, result, "", ceiling)
        attack_outcome["outcome"] = "held" + (f" ({note})" if note else "")
        return
    own = Path(tempfile.mkdtemp(prefix="attack-grade-"))   # this grade's own temp and home folders
    if uid is not None:
        os.chmod(own, 0o755)  # the ordinary user's way to its folders
    places = {"TMPDIR": own / "tmp", "HOME": own / "home"}
    for place in places.values():
        place.mkdir()
        os.chown(place, uid if uid is not None else os.getuid(), uid if uid is not None else os.getgid())
    bait = Bait(own / "bait", uid if uid is not None else os.getuid()) if "@BAIT@" in path.read_text() else None
    before_files = snapshot(*places.values(), *([bait.folder] if bait else []))
    before_containers = set(docker_leftovers()) if sandbox == "docker" else set()
    # The attack's processes carry a mark of this grade's own: another run's daemons are not ours.
    mark = f"{ATTACK_MARK}-{os.urandom(4).hex()}"
    (own / "upload").mkdir()
    marked = own / "upload" / path.name
    marked.write_text(planted(path.read_text(), mark, bait))
    if uid is not None:
        for made in (own / "upload", marked):
            os.chown(made, uid, uid)
    graded = grade(marked, "--sandbox", sandbox, *exercise_args(path), timeout=TIME_LIMIT_S + 60,
                   env={**{k: str(v) for k, v in places.items()}, **SEED, **(KERNEL_LAYER if kernel else {}),
                        **call_limit(path)}, uid=uid)
    connected = bait.close() if bait else []
    after_procs = left_running(own, mark)
    after_files = snapshot(*places.values(), *([bait.folder] if bait else []))
    shutil.rmtree(own, ignore_errors=True)
    changed = sorted(k for k in {*before_files, *after_files} if before_files.get(k) != after_files.get(k))
    result = graded.result or {}
    outcome = attack_outcome
    outcome.update({"attack": path.stem, "sandbox": sandbox + ("-user" if uid is not None else "-kernel" if kernel else ""),
                    "status": result.get("status"),
                    "score": result.get("score"), "honest": ceiling, "seconds": graded.seconds})
    assert graded.exit_code == 0 and result.get("status") in ("graded", "rejected"), \
        f"no result: exit {graded.exit_code}\n{graded.terminal[-3000:]}"
    assert_score_held(path, result, graded.terminal, ceiling)
    assert graded.seconds < TIME_LIMIT_S
    assert not after_procs, f"left running: {after_procs}"
    assert not changed, f"files changed outside the sandbox: {changed}"
    assert not connected, f"the attack connected to the test's sockets: {connected}"
    if sandbox == "docker":  # containers of this grade: none that other grades on the machine started
        assert set(docker_leftovers()) - before_containers == set()
    outcome["outcome"] = "held"


def assert_score_held(path: Path, result: dict, terminal: str, ceiling: float) -> None:
    """What an attack must not gain, in either path: points, raw text, forged notes, a hidden bug."""
    assert result["score"] <= ceiling + 1e-6, f"scored {result['score']} above its honest {ceiling}"
    assert not raw_text(result, terminal), f"raw student text reached the output: {raw_text(result, terminal)}"
    assert not [n for n in result.get("notes", []) if "FORGED" in n], f"forged notes shown: {result['notes']}"
    diagnosed = re.search(r"^# diagnosed: (.+)$", path.read_text(), re.M)
    if diagnosed:
        assert result["status"] == "graded", f"{path.name} must be graded to show its diagnosis"
        named = {b["id"] for b in result.get("bugs") or ()}
        assert set(diagnosed.group(1).split()) <= named, f"the result names {sorted(named)}"


# -- the delegation family against every installed exercise ------------------------------------
# Each route runs in a process that installed the audit hook the way a worker does (sandbox.audit,
# with the exercise's own Entry.refuse), from a file that plays the submission. A route must raise
# sandbox.audit.Refused; an honest twin of the same kind must run.
ROUTES = {
    "marshal.loads": "marshal.loads(marshal.dumps(compile('1 + 1', 'f', 'eval')))",
    "pickle's globals": "pickle.loads(pickle.dumps(len))",
    "a TorchScript archive": "torch.jit.load(io.BytesIO(b'PK'))",
    "torch._C's archive loader": "torch._C.import_ir_module_from_buffer(torch._C.CompilationUnit(), b'PK', None, {}, False)",
    "TorchScript IR text": "torch._C.parse_ir('graph(%x : Tensor):\\n  return (%x)')",
    "exec of decoded text": "exec(base64.b64decode('aGlkZGVuX25hbWUgPSA3').decode())",
    "code.replace": "(lambda: 0).__code__.replace(co_name='renamed')",
    "ctypes": "ctypes.CDLL(None)",
    "a program": "subprocess.run(['true'])",
    "fork_exec directly": "_posixsubprocess.fork_exec()",
    "sys._getframe": "sys._getframe(0)",
    "inspect.stack": "inspect.stack()",
    "every thread's frames": "sys._current_frames()",
    "gc.get_objects": "gc.get_objects()",
    "gc.get_referrers": "gc.get_referrers(torch)",
    "a traceback's frame": "traceback_frame()",
    "tracing": "sys.settrace(lambda *a: None)",
    "/proc/self/fd": "open('/proc/self/fd/0', 'rb')",
    "/proc/self/mem": "open(f'/proc/{os.getpid()}/mem', 'rb')",
    "the functional's source file": "open(torch.nn.functional.__file__).read()",
}
HONEST_ROUTES = {
    "a dataclass": "dataclasses.make_dataclass('Config', [('dim', int)])(3)",
    "a namedtuple": "collections.namedtuple('Shape', 'b t c')(1, 2, 3)",
    "TorchScript of a function": "torch.jit.script(scripted_softmax)(torch.ones(2, 3))",
    "TorchScript of nn.Softmax and nn.Linear": "torch.jit.script(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Softmax(-1)))(torch.ones(2, 3))",
    "compile of the file's own text": "exec(compile('x = 1 + 1', 'f', 'exec'), {})",
    "SDPA's sibling F.softmax": "torch.nn.functional.softmax(torch.ones(3), -1)",
    "reading its own folder": "os.listdir('.')",
}
FAMILY_DRIVER = '''
import base64, collections, ctypes, dataclasses, gc, inspect, io, json, marshal, os, pickle, subprocess, sys
import _posixsubprocess
import torch
from sandbox import audit
from sandbox.contract import Entry


def traceback_frame():
    try:
        raise ValueError
    except ValueError as err:
        return err.__traceback__.tb_frame


def scripted_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.softmax(x, -1)


x, w, b = torch.randn(1, 3, 4), torch.randn(12, 4), torch.randn(12)
p, c, one, zero = torch.randn(4, 4), torch.randn(4), torch.ones(4), torch.zeros(4)
q = torch.randn(1, 1, 3, 4)
OPERANDS = {  # what each native operator of the lists is called with
    "scaled_dot_product_attention": (q, q, q), "_scaled_dot_product_flash_attention_for_cpu": (q, q, q),
    "_scaled_dot_product_attention_math": (q, q, q), "_scaled_dot_product_flash_attention": (q, q, q),
    "_native_multi_head_attention": (x, x, x, 4, 1, w, b, p, c),
    "_transformer_encoder_layer_fwd": (x, 4, 1, w, b, p, c, False, False, 1e-5, one, zero, one, zero, p, c, p, c),
    "scaled_dot_product_flash_attention_for_cpu": (q, q, q),
}
entry = Entry.from_dict(json.loads(sys.argv[1]))
routes, honest = json.loads(sys.argv[2]), json.loads(sys.argv[3])
audit.install(entry.refuse, None, __file__)
outcome = {}
for name, line in {**routes, **honest}.items():
    try:
        eval(compile(line, name, "eval"))
        outcome[name] = "ran"
    except audit.Refused as err:
        outcome[name] = "refused: " + str(err)
    except Exception as err:
        outcome[name] = "raised " + type(err).__name__ + ": " + str(err)[:200]
for path in entry.refuse:
    try:
        target = audit._resolve(path)
        if target is None:
            __import__(path)
        elif isinstance(target, type(torch)):
            next(v for v in vars(target).values() if callable(v) and getattr(v, "__module__", "") == path)()
        else:
            target(*OPERANDS.get(path.rsplit(".", 1)[-1], ()))
        outcome[path] = "ran"
    except audit.Refused as err:
        outcome[path] = "refused: " + str(err)
    except Exception as err:
        outcome[path] = "raised " + type(err).__name__ + ": " + str(err)[:200]
print(json.dumps(outcome))
'''


@pytest.mark.parametrize("name", sorted(__import__("exercise").all_exercises()))
def test_every_exercise_refuses_the_delegation_family(name, tmp_path):
    """Every route of the family is refused with a message that says what and why, in every
    installed exercise; each refused implementation the exercise names is refused when it is
    called, built or imported; and the honest twins (a dataclass, TorchScript, F.softmax) run."""
    import json
    import subprocess
    import sys

    from exercise import all_exercises
    entry = all_exercises()[name].entry
    driver = tmp_path / "submission.py"
    driver.write_text(FAMILY_DRIVER + "".join(f"# {line}\n" for line in [*ROUTES.values(), *HONEST_ROUTES.values()]))
    done = subprocess.run([sys.executable, str(driver), json.dumps(entry.to_dict()), json.dumps(ROUTES),
                           json.dumps(HONEST_ROUTES)], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    not_refused = {k: v for k, v in outcome.items() if k in ROUTES and not v.startswith("refused: ")}
    assert not not_refused, f"routes that were not refused: {not_refused}"
    assert all("refused by the grader (" in outcome[k] for k in ROUTES), outcome
    assert {k: v for k, v in outcome.items() if k in HONEST_ROUTES and v != "ran"} == {}
    assert entry.refuse, "an attention exercise refuses PyTorch's attention"
    kept = {path: outcome[path] for path in entry.refuse if not outcome[path].startswith("refused: ")}
    assert not kept, f"refused implementations that still ran: {kept}"
