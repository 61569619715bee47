"""The zygote's side of a warm sandbox's reset: after a submission, leave nothing of it for the next.

A warm sandbox's zygote serves one submission after another. Its workers run as the same user, so
besides leaving processes and files they could change the zygote itself through calls that Landlock
does not govern: its resource limits (prlimit), priority, I/O priority (ioprio_set), CPU affinity,
scheduling policy and attributes (sched_setattr: utilisation clamps, deadline parameters), which
every later worker would inherit; and they can leave System V IPC objects, which outlive processes.
(Kernel keyrings and POSIX message queues, which outlive processes too, are shut off for workers by
their seccomp filter: see sandbox.confine.)
`after_submission` undoes or detects all of it, and answers False whenever it cannot vouch for the
result: the caller then replaces the whole server with a fresh one.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
from collections.abc import Callable

from sandbox.tidy import remove_tree

_PR_SET_DUMPABLE = 4
_PR_GET_TIMERSLACK = 30
_IOPRIO_WHO_PROCESS = 1
_SYSCALLS = {"x86_64": {"ioprio_get": 252, "sched_getattr": 315},   # read-only views of this process
             "aarch64": {"ioprio_get": 31, "sched_getattr": 275}}
_IPC_RMID = 0
_IPC_TABLES = (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl"))


def protect_self() -> None:
    """Make the zygote non-dumpable: a process of the same user may then neither ptrace it nor
    open its /proc files (memory, environment), even where Landlock is missing."""
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def unprotect_self() -> None:
    """In a forked worker: an ordinary process again, as in a cold grade (its own /proc readable)."""
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def settings() -> tuple:
    """What a process of the same user could change in this one from outside, and its workers
    would inherit: every resource limit, the priority, the I/O priority, the CPU affinity, the
    scheduling policy and all its attributes, the timer slack, the OOM score and the cgroup."""
    import platform
    limits = tuple(resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
                   if name.startswith("RLIMIT_"))
    libc = ctypes.CDLL(None, use_errno=True)
    calls = _SYSCALLS.get(platform.machine(), {})
    ioprio = libc.syscall(calls["ioprio_get"], _IOPRIO_WHO_PROCESS, 0) if calls else None
    attr = ctypes.create_string_buffer(128)  # struct sched_attr, read whole (size 56 today)
    sched = attr.raw if calls and libc.syscall(calls["sched_getattr"], 0, attr, 128, 0) == 0 else \
        (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    proc: list[str | None] = []
    for name in ("oom_score_adj", "cgroup"):
        try:
            with open(f"/proc/self/{name}") as f:
                proc.append(f.read())
        except OSError:
            proc.append(None)
    return limits, os.getpriority(os.PRIO_PROCESS, 0), ioprio, tuple(sorted(os.sched_getaffinity(0))), \
        sched, libc.prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0), tuple(proc)


def after_submission(command: dict, baseline: tuple, reap: Callable[[], object], wait_s: float = 5.0) -> bool:
    """Kill every process this zygote can signal but itself, remove the IPC objects and (as the
    student's own user) the files the submission left, and check that nobody changed this
    process. True when all of that holds.

    Killing "every process it can signal" is only right where that set is exactly the student's
    processes: as PID 1 of a PID namespace (scope "namespace"), or as a user that exists only for
    the student (scope "uid", never root). Elsewhere it kills nothing and answers False."""
    scope = command.get("scope")
    if not (scope == "namespace" and os.getpid() == 1 or scope == "uid" and os.getuid() != 0):
        return False
    if not _kill_all_others(scope, reap, wait_s):
        return False
    clean = _remove_ipc(own_only=scope == "uid") if scope == "uid" or command.get("private_ipc") else False
    if scope == "uid":
        clean = _remove_own_files(command.get("wipe") or ()) and clean
    return clean and settings() == baseline


def _kill_all_others(scope: str, reap: Callable[[], object], wait_s: float) -> bool:
    end = time.monotonic() + wait_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process we may signal, except ourselves
        except ProcessLookupError:
            pass
        reap()
        if not _others_alive(scope):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def _others_alive(scope: str) -> bool:
    """Whether any process but this one is left: in a PID namespace every process is our
    descendant, so having no child left is enough; as the student's user, /proc tells."""
    if scope == "namespace":
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        return True
    return bool(processes_of(os.getuid(), but=os.getpid()))


def processes_of(uid: int, but: int = 0) -> list[int]:
    """The live (not zombie) processes of user `uid`, except `but`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != but:
            try:
                with open(f"/proc/{entry}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
            except (OSError, ValueError):
                continue
            if int(fields.get("Uid", "-1").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
                found.append(int(entry))
    return found


def _remove_ipc(own_only: bool) -> bool:
    """Remove the System V shared memory segments, semaphore sets and message queues of this IPC
    namespace (only this user's with own_only); True when none of them is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, left = os.getuid(), False
    for table, call in _IPC_TABLES:
        try:
            with open(f"/proc/sysvipc/{table}") as f:
                header, *lines = f.read().splitlines()
        except OSError:
            continue
        columns = header.split()
        for line in lines:
            row = dict(zip(columns, line.split()))
            if own_only and int(row.get("uid", -1)) != uid:
                continue
            ident = int(row.get("shmid") or row.get("semid") or row.get("msqid") or -1)
            args = (ident, 0, _IPC_RMID) if call == "semctl" else (ident, _IPC_RMID, None)
            if getattr(libc, call)(*args) != 0:
                left = True
    return not left


def _remove_own_files(roots) -> bool:
    """Remove what this (non-root) user made under `roots`; True when nothing of it is left."""
    # remove_tree, not os.walk: no recursion for a student's nesting to exhaust
    return all([remove_tree(root, keep_top=True, owner=os.getuid()) for root in roots])
