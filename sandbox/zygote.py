"""The zygote: a process that imported torch and forks student workers.

Forking from it makes a fresh worker cost milliseconds instead of a torch import. It never runs
a tensor op on more than one thread, since a process that has used torch's thread pool forks
children that hang (measured with torch 2.13); a warm sandbox's zygote (--warm SOURCES) runs the exercises'
warm-up code on one thread first, so that its workers find torch's lazy set-up done (warm_up). Where the OS allows, the harness starts it as PID 1 of new PID and
network namespaces: workers then have no network, cannot signal anything outside, and all of them
die with the zygote.

Commands arrive as JSON datagrams on a SOCK_SEQPACKET socket, with the worker's pipe ends passed
as file descriptors.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from typing import NoReturn

from sandbox import limits as limits_mod
from sandbox import protocol, reset, worker  # imported here: a worker reads none of the grader's files
from sandbox.confine import confine, give_workdir, initial_user_namespace, no_exec_in, open_to_others, worker_reads
from sandbox.contract import Entry


# Set at start: why the student's code cannot run under a uid of its own here (None: it can).
_NO_STUDENT_UID: str | None = None


def main() -> None:
    """The zygote as a process of its own (python -m sandbox.zygote FD [--warm SOURCES])."""
    control = socket.socket(fileno=int(sys.argv[1]))
    _as_root_outside_namespaces()  # before torch: open_to_others needs one thread
    import numpy  # noqa: F401  (torch warns when numpy is missing; import it once here)
    import torch  # noqa: F401  (imported; ops only on one thread: see the module docstring)
    warmed = "--warm" in sys.argv[2:3]
    if warmed:
        preload_lazy_torch_modules()
        warm_up(decode_sources(sys.argv[3]))
    serve(control, preload=not warmed)


def forked(control: socket.socket, *, preload: bool = False) -> None:
    """The zygote as a fresh fork of a process that already imported torch (and ran the warm-up,
    unless `preload`) on one thread (sandbox.zygote_client.Zygote.fork): single-threaded again,
    whatever threads its parent had."""
    _as_root_outside_namespaces()
    serve(control, preload=preload)


def _as_root_outside_namespaces() -> None:
    """As root of the machine: make what a worker of another uid must read reachable, or note why not."""
    if os.geteuid() == 0 and initial_user_namespace():
        global _NO_STUDENT_UID
        out_of_reach = open_to_others(worker_reads())
        if out_of_reach:
            _NO_STUDENT_UID = (f"the student's code ran as root: {', '.join(out_of_reach)} cannot be made "
                               "readable to another user here (no mount namespace)")


def serve(control: socket.socket, *, preload: bool) -> None:
    """Answer the harness's commands until its socket closes. `preload`: import torch's lazy
    modules once the first worker is on its way (a zygote that was not warmed up)."""
    reset.protect_self()
    # A worker is the orphan of the process that forked it into its namespace (_spawn): reaped here.
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    baseline = reset.settings()  # what a worker of the same user could change in this process
    statuses: dict[int, int] = {}
    _send(control, {"event": "ready", "pid": os.getpid()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, 1 << 16, 8)
        except OSError:
            return
        if not data:
            return
        command = json.loads(data)
        op = command["op"]
        if op == "spawn":
            _wait_status(0, statuses, 0)  # reap what has ended: zombies count against pids.max
            try:
                answer: dict[str, int | str] = {"pid": _spawn(command, fds, control)}
            except OSError as err:  # fork refused: the process limit is full
                answer = {"error": f"cannot start a worker: {err.strerror}"}
            for fd in fds:
                os.close(fd)
            _send(control, answer)
            if preload:  # while the first worker imports the submission: ready for every later one
                preload_lazy_torch_modules()
                preload = False
        elif op == "kill":
            kill_session(command["pid"])
            _wait_status(command["pid"], statuses, 1.0)
            _send(control, {"ok": True})
        elif op == "status":
            _send(control, {"status": _wait_status(command["pid"], statuses, command.get("wait_s", 0.5))})
        elif op == "waited":  # how long a worker's threads have waited for a CPU (proxy: a busy machine)
            _send(control, {"waited_ns": run_queue_wait_ns(command["pid"])})
        elif op == "reset":  # a warm sandbox, between two submissions
            clean = reset.after_submission(command, baseline, reap=lambda: _wait_status(0, statuses, 0))
            statuses.clear()
            _send(control, {"reset": command.get("id"), "clean": clean})
        else:
            _send(control, {"error": f"unknown op {op}"})


def preload_lazy_torch_modules() -> None:
    """Import what torch 2.13 imports on the first `torch._check_with` (sympy, via symbolic_shapes;
    a masked call of a torch.nn layer makes one): 0.4 s that every forked worker would otherwise
    pay again. An import, not an op, so forking stays safe. The zygote does it after the first
    spawn, which then starts 0.4 s sooner; that first worker pays it only if the student's code needs it."""
    import torch.fx.experimental.symbolic_shapes  # noqa: F401


def warm_up(sources) -> None:
    """Run, once and on one thread, the exercises' warm-up code (Entry.warmup: the kinds of op a
    grade starts with), so that every process forked from this one finds torch's lazy set-up done.
    Used by warm sandboxes, whose zygote and harness server fork one process per grade. Forking
    after ops is safe only because none ran on more than one thread (measured with torch 2.13:
    after a multi-threaded op, a forked child hangs in its first parallel op; after single-threaded
    ops, children run normally, even with more threads). The random number generator is left as
    it was."""
    import torch
    single_threaded_torch()
    with torch.random.fork_rng(devices=[]), worker.dynamo_stand_in():
        for source in sources:
            exec(compile(source, "<exercise warm-up>", "exec"), {"__name__": "__warm_up__"})  # noqa: S102


def warm_up_from(path: str) -> tuple[str, ...]:
    """Run the warm-up sources written to `path` (a JSON list; none where there is no such file) and
    return them: a cold grade's harness or image entry point runs its exercise's warm-up before it
    forks the student's zygote, as a warm server does, so that torch's lazy set-up is paid once for
    the harness and every worker of that zygote (sent by the host beside the job, never in it)."""
    if not os.path.exists(path):
        return ()
    with open(path) as f:
        sources = tuple(str(source) for source in json.load(f))
    warm_up(sources)
    return sources


def encode_sources(sources) -> str:
    """Warm-up sources as one command-line word."""
    import base64
    return base64.b64encode(json.dumps(list(sources)).encode()).decode()


def decode_sources(word: str) -> list[str]:
    import base64
    return [str(s) for s in json.loads(base64.b64decode(word))]


def single_threaded_torch() -> None:
    """One intra-op thread: the tests' tensors are tiny, and with several grades at once (a batch)
    each grade's extra threads only wait on the others' (measured: 2 grades on 2 cores took 3x as
    long with torch's default thread count as with one)."""
    import torch
    torch.set_num_threads(1)


# clone(2) flags for unshare(2), prctl's PR_SET_CHILD_SUBREAPER, the mount flags /proc gets
_NEWNS, _NEWPID = 0x00020000, 0x20000000
_PR_SET_CHILD_SUBREAPER = 36
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 16384, 1 << 18


def _spawn(command: dict, fds: list[int], control: socket.socket) -> int:
    """Fork a student worker; its PID as this process sees it. Where the kernel lets this process
    make namespaces, the worker is PID 1 of a PID namespace of its own, with a /proc of its own:
    the PIDs it and its children get, and the last PID the kernel handed out (/proc/loadavg),
    start afresh for every worker, so nothing an earlier student did to the PID counter (forking
    until it reads a chosen value) reaches the next one; and whatever it leaves running dies
    with it. A middle process makes the namespace and forks the worker into it, says the worker's
    PID and exits; the worker, its orphan, is reaped here (PR_SET_CHILD_SUBREAPER)."""
    req_fd, resp_fd, out_fd, tally_fd = fds
    said, say = os.pipe()
    middle = os.fork()
    if middle:
        os.close(say)
        with os.fdopen(said, "rb") as f:
            word = f.read()
        if not word.strip().isdigit():
            raise OSError(0, "the worker did not start")
        return int(word)
    # The middle child: makes the namespace, forks the worker into it (or becomes the worker where
    # the kernel refuses) and never returns to the loop above.
    note = None
    try:
        os.close(said)
        control.close()
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        # (A zygote that is not root, as in the grader's image where it runs as the student's uid,
        # cannot make one: the container's PID namespace is the slot's.)
        if os.geteuid() == 0 and libc.unshare(_NEWPID | _NEWNS) == 0:
            pid = os.fork()
            if pid:
                os.write(say, str(pid).encode())
                os._exit(0)
            os.close(say)
            # PID 1 of the new namespace: /proc shows it alone (mounted here, not in the zygote's)
            if (libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0
                    or libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0):
                note = "the worker's /proc shows the sandbox's PID namespace: a /proc of its own was refused"
        else:
            if os.geteuid() == 0:
                note = ("the worker shares the sandbox's PID namespace with the grades before it (a namespace "
                        f"of its own was refused: {os.strerror(ctypes.get_errno())})")
            os.write(say, str(os.getpid()).encode())
            os.close(say)
    except BaseException:
        os._exit(70)
    _become_worker(command, req_fd, resp_fd, out_fd, tally_fd, note)


def _become_worker(command: dict, req_fd: int, resp_fd: int, out_fd: int, tally_fd: int,
                   note: str | None) -> NoReturn:
    """In the worker (a fork of the zygote, in its own PID namespace where it could be made):
    confine it, then serve the harness; never returns."""
    try:
        reset.unprotect_self()
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        close_fds_except({0, 1, 2, req_fd, resp_fd, tally_fd})
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        cwd, path, entry = command["cwd"], command["path"], Entry.from_dict(command["entry"])
        hidden = list(command.pop("hidden", None) or ())  # named to Landlock below, then dropped
        os.chdir(cwd)
        notes, uid = [note] if note else [], command.get("uid")
        if not isinstance(uid, int) or os.geteuid() != 0:
            uid = None
        elif _NO_STUDENT_UID is not None:
            uid = None
            notes.append(_NO_STUDENT_UID)
        else:
            # The folders above the scratch folder may be closed to the new uid: in a mount
            # namespace of this worker's own, the scratch folder alone stays reachable by its path.
            notes += [f"the scratch folder is reachable only by relative paths: {p} stays closed"
                      for p in open_to_others([cwd], writable=True)]
            give_workdir(uid, cwd)
        notes += no_exec_in(cwd)
        limits = limits_mod.Limits.from_dict(command["limits"])
        notes += limits_mod.apply_to_current_process(limits,
                                                     processes_capped=bool(command.get("processes_capped")),
                                                     really_root=bool(command.get("really_root", True)),
                                                     new_uid=uid is not None)
        os.environ.update(TMPDIR=cwd, HOME=cwd)
        os.environ.pop("PYTHONPATH", None)  # the worker's imports are set up; the grader's paths stay unnamed
        import tempfile
        # gettempdir() keeps what it found first: a warm zygote's, which the worker may not write
        tempfile.tempdir = cwd
        single_threaded_torch()
        notes += confine(writable=[cwd], hidden=hidden, as_uid=uid)  # from here on, not root
        del hidden
        command.clear()
        # The notes go out before the student's code is imported: nothing it does can add to them.
        protocol.send(resp_fd, {"event": "confined", "notes": notes})
        worker.serve(req_fd, resp_fd, path, entry, tally_fd=tally_fd, audit=limits.audit)
        code = 0
    except BaseException:  # last resort in a forked child: never fall back into the zygote's loop
        code = 70
    os._exit(code)


def close_fds_except(keep: set[int]) -> None:
    """Close every file descriptor of this (freshly forked) process but `keep`."""
    try:
        open_fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 256))
    for fd in open_fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def kill_session(pid: int) -> None:
    """SIGKILL the process group (session) `pid` leads, and `pid` itself."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_queue_wait_ns(pid: int) -> int | None:
    """The nanoseconds `pid`'s threads have spent runnable but waiting for a CPU, summed (the second
    field of each thread's /proc schedstat); None where the kernel does not keep it or pid is gone."""
    try:
        tasks = os.listdir(f"/proc/{int(pid)}/task")
        total = 0
        for tid in tasks:
            with open(f"/proc/{int(pid)}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        return total
    except (OSError, ValueError, IndexError):
        return None


def _wait_status(pid: int, statuses: dict[int, int], wait_s: float) -> int | None:
    """Reap finished children (orphans included); return `pid`'s raw wait status if known."""
    end = time.monotonic() + wait_s
    while True:
        try:
            while True:
                done, status = os.waitpid(-1, os.WNOHANG)
                if done == 0:
                    break
                statuses[done] = status
        except ChildProcessError:
            pass
        if pid in statuses or time.monotonic() >= end:
            return statuses.get(pid)
        time.sleep(0.01)


def _send(control: socket.socket, message: dict) -> None:
    control.send(json.dumps(message).encode())


if __name__ == "__main__":
    main()
