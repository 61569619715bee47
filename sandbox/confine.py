"""Confining a freshly forked worker before it imports the student's code (Linux).

- Capabilities: all dropped, and no new privileges, so a worker started by root is no longer
  privileged (no mounts, modules, raw devices, clock or reboot) and cannot regain privileges
  through a set-uid program.
- A seccomp filter: no kernel keyrings (the user's keyrings outlive every process, so a key planted by
  one grade would be read by the next, warm or cold) and no POSIX message queues (they outlive the
  process in the IPC namespace a warm sandbox keeps).
- Landlock (an unprivileged Linux security module, kernel 5.13+): the worker may write only in its
  scratch folder (and /dev/null); it may read the whole filesystem except the hidden paths (the
  exercise's tests and reference, the platforms' folders, other grades' scratch space, and /dev but
  for the few devices a program needs: no terminal, so no typed-ahead line and no echo); where the
  kernel's Landlock is recent enough it may open no TCP connection and send no signal outside its
  own processes. The restriction is inherited by every thread and process it starts and cannot be
  lifted.

Everything here runs in the single-threaded child right after fork: Landlock applies to the calling
thread and its future children, so it must come before any thread exists.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_SYS_CAPSET = 126
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# Landlock file-system access rights (include/uapi/linux/landlock.h), and the ABI that added them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14                      # ABI 2, ABI 3
READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
         | MAKE_BLOCK | MAKE_SYM)
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE   # the rights a rule on a file may carry
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2                     # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2          # ABI 6

ALWAYS_HIDDEN = ("/autograder", "/grade", "/dev")        # Gradescope's and PrairieLearn's folders; devices
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")   # what is left of /dev

# Seccomp (include/uapi/linux/seccomp.h, filter.h, audit.h): the syscalls refused, by architecture.
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_X32_BIT = 0x40000000
REFUSED_SYSCALLS = {  # add_key, request_key, keyctl, mq_open, mq_unlink, mq_timedsend, mq_notify
    "x86_64": (0xC000003E, (248, 249, 250, 240, 241, 242, 244)),
    "aarch64": (0xC00000B7, (217, 218, 219, 180, 181, 182, 184)),
}


def confine(*, writable: list[str], hidden: list[str]) -> list[str]:
    """Drop privileges and apply Landlock to this process. Returns notes on what the OS refused."""
    notes = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        notes.append("no-new-privileges could not be set")
    notes += _drop_capabilities(libc)
    notes += _seccomp(libc)
    notes += _landlock(libc, writable=writable, hidden=[*hidden, *ALWAYS_HIDDEN])
    return notes


def _seccomp(libc) -> list[str]:
    """Refuse (EPERM) the syscalls of REFUSED_SYSCALLS, and every syscall of another ABI (x32, or
    32-bit code), whose numbers differ. Needs no-new-privileges (set first) or root."""
    import platform
    arch = REFUSED_SYSCALLS.get(platform.machine())
    if arch is None:
        return [f"kernel keyrings not shut off: no seccomp filter for {platform.machine()}"]
    audit_arch, numbers = arch
    refuse = len(numbers) + 1  # a jump counts from the next instruction: to the final EPERM from the JGE
    program = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, 1, 0, audit_arch), (_RET_K, 0, 0, _RET_EPERM),
               (_LD_W_ABS, 0, 0, 0), (_JGE_K, refuse, 0, _X32_BIT)]
    program += [(_JEQ_K, refuse - 1 - i, 0, nr) for i, nr in enumerate(numbers)]
    program += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]
    raw = b"".join(struct.pack("HBBI", *op) for op in program)
    filters = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        return [f"kernel keyrings not shut off: seccomp refused ({os.strerror(ctypes.get_errno())})"]
    return []


def _drop_capabilities(libc) -> list[str]:
    if os.geteuid() != 0:
        return []  # an ordinary user has none to drop
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails harmlessly past the last capability
    header = struct.pack("Ii", 0x20080522, 0)       # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)                                 # effective, permitted, inheritable: none (x2)
    if libc.syscall(_SYS_CAPSET, ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        return [f"capabilities not dropped: {os.strerror(ctypes.get_errno())}"]
    return []


def landlock_abi(libc=None) -> int:
    """The kernel's Landlock ABI version; below 1 where there is none."""
    libc = libc or ctypes.CDLL(None, use_errno=True)
    return libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)


def _landlock(libc, *, writable: list[str], hidden: list[str]) -> list[str]:
    abi = landlock_abi(libc)
    if abi < 1:
        return ["file-system confinement (Landlock) not available: the student's code can write "
                "wherever this user can"]
    handled = READ | WRITE | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", handled, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        return [f"Landlock ruleset refused: {os.strerror(ctypes.get_errno())}"]
    try:
        for path in readable_roots(hidden):
            _allow(libc, ruleset, path, READ & handled)
        for path in writable:
            _allow(libc, ruleset, path, handled)
        _allow(libc, ruleset, os.devnull, (READ_FILE | WRITE_FILE | TRUNCATE) & handled)
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return [f"Landlock not applied: {os.strerror(ctypes.get_errno())}"]
    finally:
        os.close(ruleset)
    return []


def _allow(libc, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            access &= FILE_RIGHTS
        rule = struct.pack("=Qi", access, fd)   # struct landlock_path_beneath_attr, packed
        libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_char_p(rule), 0)
    finally:
        os.close(fd)


def readable_roots(hidden: list[str], top: str = "/", keep: list[str] | None = None) -> list[str]:
    """Folders and files that together cover everything under `top` except the hidden paths:
    where a hidden path lies below a folder, that folder's other entries are listed instead.
    `keep` (default: Python's own installation and import path, and this package, which the worker
    runs: an editable install in a checkout under /tmp is on no import path) stays readable even
    inside a hidden folder, minus whatever hidden path lies within it."""
    real = {os.path.realpath(h) for h in hidden if os.path.lexists(h)}
    if keep is None:
        keep = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.abspath(__file__)),
                *(p for p in sys.path if p), *DEVICES]
    kept = {os.path.realpath(k) for k in keep if os.path.exists(k)} - real

    def below(path: str, folder: str) -> bool:
        return path.startswith(folder.rstrip("/") + "/")

    def cover(folder: str) -> list[str]:
        if folder in real:
            return [p for k in kept if below(k, folder) for p in cover(k)]
        if not any(below(h, folder) for h in real):
            return [folder]
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        found = []
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.islink(path):  # a link is reached through its target's own rule
                found += cover(path)
        return found

    return cover(os.path.realpath(top))
