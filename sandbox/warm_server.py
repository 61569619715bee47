"""The warm sandbox's server: a long-lived process per slot that has imported torch, pytest and the
exercises once, and grades one submission after another in a fresh fork of itself. The host's side,
which starts it and sends it the jobs, is sandbox.warm (WarmSandbox).

    python -P -m sandbox.warm_server            the server on this machine (the local sandbox)
    python -P -m sandbox.warm_server --image    the server as a Docker container's entry point

What a submission gets is what a cold grade gives it:
- its own scratch folder, which is the only place its workers may write;
- a harness that is a fresh fork of the server (the server ran tensor ops on one thread only, so
  forking is safe, and nothing one grade does to the harness's modules reaches the next);
- workers forked from the slot's zygote, confined as in a cold grade.
After each submission the harness's process group is killed and the zygote kills every process it can
signal but itself: it is PID 1 of its own PID namespace (local) or the only process of the student's
uid, drawn for this container, that must live (image). It also removes the System V IPC objects and (image) the student's files,
and checks that no worker changed its own limits, priority, CPU affinity or scheduling (sandbox.reset).
Only when it confirms all of that, this server sees no process of the submission left, and the scratch
folder is gone, does the server take the next submission; otherwise it says so and exits, and the caller
starts a fresh one. Without Landlock it never vouches, and every submission gets a fresh server.

Protocol: one JSON object per line. The server says {"event": "ready", "notes": [...]} once, then
answers each job (the harness's job with the submission's "source" in base64, and an "id") with
{"id", "report" (the harness's report, or null), "failure"}, and then, once it has cleared up,
{"event": "reset", "clean": bool}; after a clean-up it cannot vouch for, it exits.
"""
from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING

from sandbox.backend import SCRIPT_NAME
from sandbox.contract import WARM_READY_TIMEOUT_S as READY_TIMEOUT_S
from sandbox.contract import WARM_RESET_TIMEOUT_S as RESET_TIMEOUT_S
from sandbox.launch import Launched, fork_harness, kill_and_reap, run_harness
from sandbox.tidy import remove_tree

if TYPE_CHECKING:  # imported where the server starts, not before
    from sandbox.zygote_client import Zygote

_PR_SET_PDEATHSIG = 1


# --- the server --------------------------------------------------------------------------------

class Server:
    """The slot's side of the sandbox: one zygote, and a fork of itself per submission."""

    def __init__(self, image: bool, prepare: list[dict]):
        self.image = image
        self.prepare = prepare  # per exercise: its test package, and its warm-up source
        self.zygote: Zygote | None = None
        self.notes: list[str] = []
        self.can_reset = False

    def start(self) -> None:
        from sandbox.confine import landlock_abi
        from sandbox.zygote_client import Zygote
        if self.image:  # started as root: the zygote as the student's uid, then this server becomes `grader`
            from sandbox.confine import student_id
            from sandbox.container import HARNESS_USER, SCRATCH, become, start_student_zygote
            from sandbox.zygote import preload_lazy_torch_modules, warm_up
            self.student_uid = uid = student_id()  # this container's alone (see sandbox.container)

            def exec_zygote() -> Zygote:
                return Zygote(*start_student_zygote(uid, warm=self._warm_ups()), [])
            preload_lazy_torch_modules()  # then a fork of this server as the student's uid
            warm_up(self._warm_ups())
            self.zygote = zygote = Zygote.fork(as_uid=uid, cwd=SCRATCH, fallback=exec_zygote)
            become(HARNESS_USER)
            os.environ["HOME"] = tempfile.gettempdir()
        else:
            # The zygote is a fork of this server once torch is imported and warmed up, before the
            # exercises and pytest are (a worker may read neither): one torch import per slot, not two.
            from sandbox.harness import ZYGOTE_PIDS
            from sandbox.zygote import preload_lazy_torch_modules, warm_up
            preload_lazy_torch_modules()
            warm_up(self._warm_ups())
            self.zygote = zygote = Zygote.fork(max_pids=ZYGOTE_PIDS)
        self.notes = list(zygote.notes)
        # Without Landlock a worker may write outside its scratch folder and reach the zygote: no
        # reset could vouch for that, so every submission then gets a fresh server.
        self.can_reset = landlock_abi() >= 1
        if not self.can_reset:
            self.notes.append("warm sandbox restarted after every submission: no Landlock on this kernel")
        # What every harness needs, imported and warmed up once, on one thread (see warm_up).
        import pytest  # noqa: F401
        import pytest_jsonreport.plugin  # noqa: F401

        import sandbox.harness
        import sandbox.pytest_plugin  # noqa: F401
        for exercise in self.prepare:
            _import_tests(str(exercise["tests"]))
        zygote.wait_ready(READY_TIMEOUT_S)
        # Only now, with the zygote running, has `unshare` surely made its namespaces and forked the
        # zygote: the process we started is `unshare` with the zygote as its only child, or the zygote.
        assert zygote.process is not None  # started here, either way
        started = zygote.process.pid
        self.private_ipc = self.image or _own_ipc_namespace(started)
        children = [child for child, parent in _parents().items() if parent == started]
        self.zygote_pid = children[0] if children else started

    def _warm_ups(self) -> tuple[str, ...]:
        return tuple(str(p.get("warmup") or "") for p in self.prepare)

    def grade(self, message: dict) -> tuple[dict, str]:
        """The reply to one job, and the scratch folder that reset() must clear after it is sent."""
        started = time.monotonic()
        wall_s = float(message["limits"]["wall_s"])
        scratch = tempfile.mkdtemp(prefix="grade-")
        # The student's workers write here; in the image they are another user, and the sticky bit
        # keeps the submission file (ours) theirs to read, not to replace.
        os.chmod(scratch, 0o1777 if self.image else 0o700)
        path = os.path.join(scratch, SCRIPT_NAME)
        with open(path, "wb") as f:
            f.write(base64.b64decode(message["source"]))
        os.chmod(path, 0o444)
        assert self.zygote is not None  # start() made it
        job = {**{k: v for k, v in message.items() if k not in ("id", "source")}, "submission": path,
               "scratch": scratch, "zygote": {"fd": self.zygote.control.fileno(), "ready": True,
                                              "notes": self.notes, "capped": self.zygote.processes_capped}}

        def launch(write_fd: int) -> Launched:
            pid = fork_harness(job, write_fd)
            return Launched(stop=lambda: kill_and_reap(pid))
        run = run_harness(launch, wall_s, started=started)
        return {"id": message.get("id"), "report": run.report, "failure": run.failure}, scratch

    def reset(self, scratch: str) -> bool:
        """Leave nothing of the last submission: its processes, IPC objects and files, and no change
        to the zygote. True when the zygote vouches for that and this server sees it too."""
        assert self.zygote is not None  # start() made it
        control = self.zygote.control
        control.setblocking(False)
        try:  # answers meant for the harness we just killed
            while control.recv(1 << 16):
                pass
        except (BlockingIOError, OSError):
            pass
        control.setblocking(True)
        token = os.urandom(8).hex()
        command = {"op": "reset", "id": token, "scope": "uid" if self.image else "namespace",
                   "private_ipc": self.private_ipc,
                   "wipe": [tempfile.gettempdir(), "/dev/shm"] if self.image else []}
        try:
            control.send(json.dumps(command).encode())
            control.settimeout(RESET_TIMEOUT_S)
            while True:
                answer = json.loads(control.recv(1 << 16) or b"{}")
                if not answer or answer.get("reset") == token:
                    break
        except (OSError, ValueError):
            answer = {}
        remove_tree(scratch)  # however the student's code shaped it (sandbox.tidy)
        # Our own look, not only the zygote's word: no process of the student's is left but it.
        # (In the image, orphans go to the container's init; locally, to the zygote, PID 1 of their namespace.)
        if self.image:
            from sandbox.reset import processes_of
            stray = processes_of(self.student_uid, but=self.zygote_pid)
        else:
            stray = _descendants(self.zygote_pid)
        return self.can_reset and bool(answer.get("clean")) and not stray and not os.path.exists(scratch)

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()


def _own_ipc_namespace(pid: int) -> bool:
    """Whether process `pid` (the zygote's `unshare`) has an IPC namespace of its own."""
    try:
        return os.readlink(f"/proc/{pid}/ns/ipc") != os.readlink("/proc/self/ns/ipc")
    except OSError:
        return False


def _parents() -> dict[int, int]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    found[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return found


def _descendants(pid: int) -> list[int]:
    parents, found, frontier = _parents(), [], [pid]
    while frontier:
        current = frontier.pop()
        kids = [child for child, parent in parents.items() if parent == current]
        found += kids
        frontier += kids
    return found


def _import_tests(package: str) -> None:
    """Import an exercise's test modules under the names pytest gives them (their package path),
    so that each grade's pytest finds them imported instead of importing them again."""
    import importlib
    import pathlib

    from sandbox.harness import tests_folder
    for path in sorted(pathlib.Path(tests_folder(package)).glob("*.py")):
        if path.stem == "conftest" or path.stem.startswith("test_"):
            importlib.import_module(f"{package}.{path.stem}")


def main() -> int:
    image = "--image" in sys.argv[1:]
    prepare = json.loads(base64.b64decode(sys.argv[sys.argv.index("--prepare") + 1])) if "--prepare" in sys.argv else []
    channel = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol's own copy of stdout
    os.dup2(2, 1)                                     # anything else printed goes to the log
    sys.stdout = sys.stderr
    server = Server(image=image, prepare=prepare)
    try:
        server.start()
        channel.write(json.dumps({"event": "ready", "notes": server.notes}) + "\n")
        for line in sys.stdin:
            if not line.strip():
                continue
            reply, scratch = server.grade(json.loads(line))
            channel.write(json.dumps(reply) + "\n")  # the grade does not wait for the clean-up
            clean = server.reset(scratch)
            channel.write(json.dumps({"event": "reset", "clean": clean}) + "\n")
            if not clean:
                return 0  # the caller starts a fresh server for the next submission
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
