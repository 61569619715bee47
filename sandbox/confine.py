"""Confining a freshly forked worker before it imports the student's code (Linux).

- Capabilities: all dropped, and no new privileges, so a worker started by root is no longer
  privileged (no mounts, modules, raw devices, clock or reboot) and cannot regain privileges
  through a set-uid program.
- A seccomp filter (see REFUSED below): no change of metadata (modes, owners, extended attributes,
  times), no hard link or device node, no AF_UNIX socket but a socketpair, no io_uring, ptrace,
  namespaces or mounts, no kernel keyrings or POSIX message queues (both outlive the process).
- As root, a uid and gid of the grade's own (become_student), which owns no host file.
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
from dataclasses import dataclass

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_SYS_CAPSET = 126
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_DUMPABLE = 38, 24, 4
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

# Seccomp (include/uapi/linux/seccomp.h, filter.h, audit.h). A filter sees a syscall's number and
# its integer arguments, never the path a pointer names, so what it refuses, it refuses everywhere:
# - metadata changes (mode, owner, extended attributes, times), hard links and device nodes: honest
#   code needs none of them, and Landlock governs none of them (a worker of the same user as the
#   grader could otherwise chmod the grader's own files, or plant an attribute the next grade reads);
# - AF_UNIX sockets: connect() to an existing pathname socket (/var/run/docker.sock, a database's)
#   is not governed by Landlock; a socketpair stays allowed, and the harness's channels are pipes;
# - io_uring, whose operations (open, connect, setxattr, link...) run without passing this filter;
# - other processes' memory (ptrace, process_vm_*, pidfd_getfd), new namespaces and mounts (unshare,
#   setns, clone with a namespace flag, the mount API), kernel keyrings and POSIX message queues
#   (both outlive the process: a key or queue planted by one grade would be read by the next),
#   eBPF, perf events and userfaultfd;
# - anonymous memory files (memfd_create, memfd_secret): a shared object of the student's own would
#   be loaded from one (dlopen of /proc/self/fd/N) where the writable folders are mounted noexec
#   (no_exec_in);
# - clone3 answers ENOSYS (its flags sit in memory the filter cannot read), so the C library falls
#   back to clone, whose flags are checked.
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_X32_BIT = 0x40000000
AF_UNIX = 1
# CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET
CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_ARG0 = 16   # offsetof(struct seccomp_data, args[0]); the low 32 bits on a little-endian machine


@dataclass(frozen=True)
class SyscallTable:
    audit_arch: int
    refused: dict[str, int]   # name -> number: answered EPERM
    clone3: int
    socket: int
    clone: int


REFUSED = {  # name -> (x86_64 number, aarch64 number or None where the call does not exist there)
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, None), "fchown": (93, 55), "lchown": (94, None), "fchownat": (260, 54),
    "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7), "setxattrat": (463, 463),
    "removexattr": (197, 14), "lremovexattr": (198, 15), "fremovexattr": (199, 16),
    "removexattrat": (466, 466),
    "utime": (132, None), "utimes": (235, None), "futimesat": (261, None), "utimensat": (280, 88),
    "link": (86, None), "linkat": (265, 37), "mknod": (133, None), "mknodat": (259, 33),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_by_handle_at": (304, 265),
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_notify": (244, 184),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
}
TABLES = {
    "x86_64": SyscallTable(0xC000003E, {n: x for n, (x, _a) in REFUSED.items()}, clone3=435, socket=41, clone=56),
    "aarch64": SyscallTable(0xC00000B7, {n: a for n, (_x, a) in REFUSED.items() if a is not None},
                            clone3=435, socket=198, clone=220),
}


def seccomp_program(table: SyscallTable) -> list[tuple[int, int, int, int]]:
    """The filter as classic BPF instructions (code, jt, jf, k). Jumps are written to labels and
    resolved here: a jump counts instructions from the one after it."""
    deny, nosys, allow = "deny", "nosys", "allow"
    ops: list = [(_LD_W_ABS, 0, 0, 4), (_JEQ_K, "next", deny, table.audit_arch),
                 (_LD_W_ABS, 0, 0, 0), (_JGE_K, deny, "next", _X32_BIT)]   # another ABI's numbers differ
    ops += [(_JEQ_K, deny, "next", nr) for nr in sorted(set(table.refused.values()))]
    ops += [(_JEQ_K, nosys, "next", table.clone3), (_JEQ_K, "socket", "next", table.socket),
            (_JEQ_K, "clone", allow, table.clone),
            "clone", (_LD_W_ABS, 0, 0, _ARG0), (_JSET_K, deny, allow, CLONE_NEW_NAMESPACES),
            "socket", (_LD_W_ABS, 0, 0, _ARG0), (_JEQ_K, deny, allow, AF_UNIX),
            allow, (_RET_K, 0, 0, _RET_ALLOW),
            deny, (_RET_K, 0, 0, _RET_ERRNO | EPERM),
            nosys, (_RET_K, 0, 0, _RET_ERRNO | ENOSYS)]
    labels: dict[str, int] = {}
    program: list[tuple[int, int | str, int | str, int]] = []
    for op in ops:
        if isinstance(op, str):
            labels[op] = len(program)
        else:
            program.append(op)

    resolved = []
    for at, (code, jt, jf, k) in enumerate(program):
        jt = 0 if jt == "next" else (labels[jt] - at - 1 if isinstance(jt, str) else jt)
        jf = 0 if jf == "next" else (labels[jf] - at - 1 if isinstance(jf, str) else jf)
        assert 0 <= jt < 256 and 0 <= jf < 256, "a seccomp jump too long"
        resolved.append((code, jt, jf, k))
    return resolved


def confine(*, writable: list[str], hidden: list[str], as_uid: int | None = None) -> list[str]:
    """Drop privileges and apply seccomp and Landlock to this process; with `as_uid` (as root),
    end as that uid (become_student). Returns notes on what the OS refused."""
    notes = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        notes.append("no-new-privileges could not be set")
    if as_uid is None:
        notes += _drop_capabilities(libc)
    # As root the rules are made while every path is reachable; then the uid changes (neither
    # Landlock nor this filter stops setresuid, and no-new-privileges keeps exec from regaining).
    notes += _seccomp(libc)
    notes += _landlock(libc, writable=writable, hidden=[*hidden, *ALWAYS_HIDDEN])
    if as_uid is not None:
        become_student(as_uid, libc)
    return notes


# The uids and gids a student's processes get when the grader runs as root, one drawn per grade: far
# above the ranges that distributions, systemd's dynamic users and containers' subordinate ids use,
# so that no host file, process or socket belongs to it (as isolate gives each box a uid of its own).
STUDENT_ID_BASE, STUDENT_ID_SPAN = 2_000_000_000, 100_000_000


def student_id() -> int:
    """A uid (and gid) for one grade's processes, unpredictable and almost surely unused."""
    import secrets
    return STUDENT_ID_BASE + secrets.randbelow(STUDENT_ID_SPAN)


def give_workdir(uid: int, workdir: str) -> None:
    """As root: the grade's scratch folder becomes `uid`'s alone."""
    os.chown(workdir, uid, uid)
    os.chmod(workdir, 0o700)


def become_student(uid: int, libc=None) -> None:
    """As root, right after fork: become `uid` (and the same gid) with no supplementary group, so
    the student's code holds no host identity: it owns no file of the host (so it can change none,
    whatever the mode bits) and reads only what everybody may read. The bounding set goes first,
    while CAP_SETPCAP is still held; the change of uid clears every other capability. The process
    is marked dumpable again, so that its own /proc entries are its own."""
    libc = libc or ctypes.CDLL(None, use_errno=True)
    _drop_bounding_set(libc)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid,) * 3 or os.getresgid() != (uid,) * 3 or os.getgroups():
        raise OSError("the student's uid could not be taken")
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def _seccomp(libc) -> list[str]:
    """Apply the filter of seccomp_program. Needs no-new-privileges (set first) or root."""
    import platform
    table = TABLES.get(platform.machine())
    if table is None:
        return [f"no seccomp filter for {platform.machine()}: metadata changes, sockets and keyrings "
                "are not shut off"]
    program = seccomp_program(table)
    raw = b"".join(struct.pack("HBBI", *op) for op in program)
    filters = ctypes.create_string_buffer(raw)
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        return [f"seccomp refused ({os.strerror(ctypes.get_errno())}): metadata changes, sockets and "
                "keyrings are not shut off"]
    return []


def _drop_bounding_set(libc) -> None:
    """No capability can be regained, by this process or a program it starts (needs CAP_SETPCAP)."""
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails harmlessly past the last capability


def _drop_capabilities(libc) -> list[str]:
    if os.geteuid() != 0:
        return []  # an ordinary user has none to drop
    _drop_bounding_set(libc)
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


def worker_reads() -> list[str]:
    """What a worker must read whatever else is hidden: Python's own installation and import path,
    this package (an editable install in a checkout under /tmp is on no import path), the devices."""
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.abspath(__file__)),
            *(p for p in sys.path if p), *DEVICES]


def initial_user_namespace() -> bool:
    """Whether uid 0 here is the host's root (not an ordinary user mapped to 0 in a user namespace)."""
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def readable_roots(hidden: list[str], top: str = "/", keep: list[str] | None = None) -> list[str]:
    """Folders and files that together cover everything under `top` except the hidden paths:
    where a hidden path lies below a folder, that folder's other entries are listed instead.
    `keep` (default: Python's own installation and import path, and this package, which the worker
    runs: an editable install in a checkout under /tmp is on no import path) stays readable even
    inside a hidden folder, minus whatever hidden path lies within it."""
    real = {os.path.realpath(h) for h in hidden if os.path.lexists(h)}
    if keep is None:
        keep = worker_reads()
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


# mount(2) flags (include/uapi/linux/mount.h) and unshare's CLONE_NEWNS.
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_CLONE_NEWNS = 0x00020000


def open_to_others(paths: list[str], *, writable: bool = False) -> list[str]:
    """Make `paths` (what a worker of another uid must read: Python, its libraries, this package)
    reachable by a uid that owns nothing, without changing the host: in a mount namespace of this
    process's own, each folder on their way that others may not enter (a home of mode 0700 holding
    Python, say) is covered by an empty tmpfs in which only the paths themselves are bound back,
    read-only (`writable`: as they are; a worker's own scratch folder). Everything else in that
    folder then does not exist for the worker. As root, in a single-threaded process (the zygote
    before torch starts a thread; a worker right after fork). Returns the paths that stay out of
    reach."""
    blocked: dict[str, list[str]] = {}
    for path in dict.fromkeys(os.path.realpath(p) for p in paths if os.path.exists(p)):
        wall = _first_closed_folder(path)
        if wall is not None:
            blocked.setdefault(wall, []).append(path)
    if not blocked:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return sorted(p for inside in blocked.values() for p in inside)
    out_of_reach = []
    for wall in sorted(blocked, key=len):
        inside = [p for p in blocked[wall] if not any(p != q and p.startswith(q + "/") for q in blocked[wall])]
        fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in inside}
        try:
            if libc.mount(b"tmpfs", wall.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0755,size=64k") != 0:
                out_of_reach += inside
                continue
            for path, fd in fds.items():
                os.makedirs(path, mode=0o755, exist_ok=True)
                source = f"/proc/self/fd/{fd}".encode()
                if (libc.mount(source, path.encode(), None, _MS_BIND | _MS_REC, None) != 0
                        or not writable
                        and libc.mount(None, path.encode(), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None) != 0):
                    out_of_reach.append(path)
        finally:
            for fd in fds.values():
                os.close(fd)
    return out_of_reach


# statvfs's flags and the mount(2) flags they stand for: a bind remount must keep them all (in a
# user namespace the kernel refuses one that would drop a flag the mount was given).
_KEPT_FLAGS = ((os.ST_RDONLY, _MS_RDONLY), (os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV),
               (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))
_MS_NOEXEC = 8


def no_exec_in(folder: str) -> list[str]:
    """Mount `folder` (a worker's scratch folder, the one place it may write) noexec, nosuid and
    nodev, in a mount namespace of this process's own: nothing the student's code writes can be
    mapped as code, so a shared object of its own (dlopen runs its code with no Python-level event
    the audit layer would see) cannot be loaded. Nothing to do where it already is (the Docker
    sandbox's tmpfs). Needs root, or the root of a user namespace (the zygote's), before
    confine(). Returns a note when the kernel refused."""
    try:
        flags = os.statvfs(folder).f_flag
    except OSError as err:
        return [f"the scratch folder could not be checked for noexec: {err.strerror}"]
    if flags & os.ST_NOEXEC:
        return []
    libc = ctypes.CDLL(None, use_errno=True)
    kept = sum(ms for st, ms in _KEPT_FLAGS if flags & st)
    path = folder.encode()
    if (libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0
            or libc.mount(path, path, None, _MS_BIND, None) != 0
            or libc.mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_NOEXEC | _MS_NOSUID | _MS_NODEV | kept,
                          None) != 0):
        return [f"the scratch folder could not be mounted noexec ({os.strerror(ctypes.get_errno())}): "
                f"a shared object written there could be loaded"]
    return []


def _first_closed_folder(path: str) -> str | None:
    """The outermost folder on the way to `path` that others may not pass through (no x bit for
    others), or None."""
    import stat
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        folder = "/" + "/".join(parts[:depth])
        try:
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return folder
        except OSError:
            return None
    return None


def reachable_by_others(path: str) -> bool:
    """Whether a uid that owns nothing may reach `path` (every folder on its way open to others)."""
    return _first_closed_folder(os.path.realpath(path)) is None
