"""The harness's client of the zygote (sandbox.zygote): it starts one (in new PID and network
namespaces where it can) or takes one a container's entry point started, and has it fork each
worker, with the pipes the proxy talks over and a drain for what the worker prints."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.contract import Entry
from sandbox.failures import WorkerFailure
from sandbox.limits import Limits, PidsCgroup


@dataclass
class _WorkerProcess:
    pid: int
    req_fd: int
    resp_fd: int
    output: _OutputDrain
    tally_fd: int = -1  # read end of the pipe the worker counts refusals into (audit.py)
    notes: list[str] = field(default_factory=list)  # what the confinement could not do (sent before the import)


class Zygote:
    """A running zygote process: started here (optionally in new PID and network namespaces), or
    started by a container's entry point and handed over as a socket."""

    def __init__(self, control: socket.socket, process: subprocess.Popen | _Forked | None, notes: list[str],
                 cgroup: PidsCgroup | None = None):
        self.control, self.process, self.notes, self.cgroup = control, process, notes, cgroup
        self.processes_capped = cgroup is not None  # a pids cgroup bounds the zygote and its workers
        self.lock = threading.Lock()
        self._ready: dict | None = None

    @classmethod
    def start(cls, *, isolate: bool = True, max_pids: int = 0, warm: tuple[str, ...] | None = None) -> Zygote:
        """Start a zygote here; with max_pids, inside a pids cgroup where this process may make one;
        `warm`: the warm-up sources it runs for its workers (a warm sandbox's zygote, which serves many)."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        notes = []
        cgroup = PidsCgroup.create(max_pids) if max_pids else None
        prefix = namespace_prefix() if isolate else None
        if isolate and prefix is None:
            notes.append("network not isolated: this OS does not let the grader create namespaces")
        cmd = (prefix or []) + zygote_command(child.fileno(), warm)
        process = subprocess.Popen(cmd, pass_fds=[child.fileno()], stdin=subprocess.DEVNULL,
                                   env=zygote_env(), preexec_fn=cgroup.enter if cgroup else None)
        child.close()
        return cls(parent, process, notes, cgroup)

    @classmethod
    def fork(cls, *, max_pids: int = 0, preload: bool = False, as_uid: int | None = None,
             cwd: str | None = None, fallback: Callable[[], Zygote] | None = None) -> Zygote:
        """A zygote forked from this process, which must have imported torch and run its warm-up on
        one thread and hold nothing the student may not read (sandbox.warm_server before it imports
        the exercises): its torch import is this process's, where start() pays a second one (a
        warm slot's zygote cost as much CPU to start as its server). In new PID, network, IPC and
        mount namespaces as start() puts it, with /proc of its own; where the kernel refuses them,
        started by `fallback` (default: as start() starts it) instead. `as_uid` (as root, in the
        grader's image): no namespaces (the container's are), the zygote runs as that uid (and
        gid), in its own session, in `cwd`. `preload`: a zygote not warmed up imports torch's lazy
        modules once its first worker is on its way."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cgroup = PidsCgroup.create(max_pids) if max_pids else None
        env = zygote_env()
        pid = os.fork()
        if pid == 0:  # never returns
            parent.close()
            _forked_zygote(child, env, cgroup, preload=preload, as_uid=as_uid, cwd=cwd)
        child.close()
        parent.settimeout(30.0)
        try:
            isolated = json.loads(parent.recv(1 << 16) or b"{}").get("event") == "forked"
        except (OSError, ValueError):
            isolated = False
        process = _Forked(pid)
        if not isolated:  # namespaces refused here: the zygote as start() makes it, or none
            process.kill()
            process.wait()
            parent.close()
            if cgroup is not None:
                cgroup.remove()
            return fallback() if fallback else cls.start(isolate=True, max_pids=max_pids)
        return cls(parent, process, [], cgroup)

    @classmethod
    def attached(cls, fd: int, *, ready: bool = False, notes: list[str] | None = None,
                 capped: bool = False) -> Zygote:
        """A zygote someone else started (a container's entry point, a warm server), reached through
        `fd`; `ready` when that one already took its ready message, `capped` when it put it in a
        pids cgroup."""
        zygote = cls(socket.socket(fileno=fd), None, list(notes or ()))
        zygote.processes_capped = capped
        if ready:
            zygote._ready = {"event": "ready"}
        return zygote

    def wait_ready(self, timeout_s: float) -> None:
        if self._ready is None:
            self._ready = self._recv(timeout_s)

    def spawn(self, *, path: str, cwd: str, entry: Entry, limits: Limits,
              hidden: tuple[str, ...] = (), uid: int | None = None) -> _WorkerProcess:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        tally_r, tally_w = os.pipe()
        command = {"op": "spawn", "path": path, "cwd": cwd, "limits": limits.to_dict(),
                   "processes_capped": self.processes_capped, "entry": entry.to_dict(),
                   "really_root": os.geteuid() == 0, "hidden": list(hidden), "uid": uid}
        try:
            with self.lock:
                socket.send_fds(self.control, [json.dumps(command).encode()], [req_r, resp_w, out_w, tally_w])
                answer = self._recv(10.0)
            if "pid" not in answer:
                raise WorkerFailure("exit", str(answer.get("error", "the sandbox could not start a worker")))
        except (OSError, WorkerFailure) as err:
            for fd in (req_w, resp_r, out_r, tally_r):  # no worker holds the other ends: ours go too
                os.close(fd)
            if isinstance(err, WorkerFailure):
                raise
            raise WorkerFailure("exit", "the sandbox's process spawner is gone (did your code kill it?)") from err
        finally:
            for fd in (req_r, resp_w, out_w, tally_w):
                os.close(fd)
        os.set_blocking(req_w, False)  # requests are written against a deadline (protocol.send)
        os.set_blocking(tally_r, False)
        return _WorkerProcess(int(answer["pid"]), req_w, resp_r, _OutputDrain(out_r, limits.output_bytes),
                              tally_r)

    def kill(self, pid: int) -> None:
        self._command({"op": "kill", "pid": pid})

    def exit_status(self, pid: int) -> int | None:
        return self._command({"op": "status", "pid": pid, "wait_s": 0.5}).get("status")

    def run_queue_wait_ns(self, pid: int) -> int | None:
        """How long the worker's threads have waited for a CPU so far (sandbox.zygote.run_queue_wait_ns)."""
        waited = self._command({"op": "waited", "pid": pid}).get("waited_ns")
        return waited if isinstance(waited, int) and not isinstance(waited, bool) else None

    def close(self) -> None:
        """Kill the zygote we started (in a PID namespace every worker dies with it); a zygote we
        were handed exits when its socket closes, and its container ends the rest."""
        self.control.close()  # a zygote that cannot be killed from here exits when its socket closes
        if self.process is not None:
            try:
                self.process.kill()
            except PermissionError:  # another user's (the student's, in the image)
                pass
            self.process.wait()
        if self.cgroup is not None:
            self.cgroup.remove()

    def _command(self, command: dict) -> dict:
        with self.lock:
            try:
                self.control.send(json.dumps(command).encode())
                return self._recv(5.0)
            except (OSError, WorkerFailure):
                return {}

    def _recv(self, timeout_s: float) -> dict:
        self.control.settimeout(timeout_s)
        try:
            data = self.control.recv(1 << 16)
        except TimeoutError as err:
            raise WorkerFailure("timeout", "the sandbox's process spawner did not answer") from err
        if not data:
            raise WorkerFailure("exit", "the sandbox's process spawner exited")
        try:  # the zygote shares the student's user in a container: its answers are checked too
            answer = json.loads(data)
        except (ValueError, RecursionError) as err:
            raise WorkerFailure("protocol", "the sandbox's process spawner sent garbage") from err
        if not isinstance(answer, dict) or ("pid" in answer and not isinstance(answer["pid"], int)):
            raise WorkerFailure("protocol", "the sandbox's process spawner sent garbage")
        return answer


class _Forked:
    """The process Zygote.fork made (the zygote's parent outside its PID namespace), as much of
    subprocess.Popen as Zygote uses."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 9)
            except (ProcessLookupError, PermissionError):  # gone, or the student's uid's (the image)
                pass

    def wait(self) -> int:
        if self.returncode is None:
            try:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            except ChildProcessError:
                self.returncode = -9
        return int(self.returncode)


# clone(2) flags for unshare(2), prctl's PR_SET_PDEATHSIG, and the mount flags /proc gets
_NEWNS, _NEWIPC, _NEWUSER, _NEWPID, _NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x20000000, 0x40000000
_PR_SET_PDEATHSIG = 1
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 16384, 1 << 18


def _forked_zygote(control: socket.socket, env: dict, cgroup: PidsCgroup | None, *, preload: bool,
                   as_uid: int | None, cwd: str | None) -> None:
    """In the child of Zygote.fork: new namespaces as `unshare --net --pid --ipc --mount
    --mount-proc --fork --kill-child` makes them (and --user --map-root-user when not root), then
    the zygote as PID 1 of its PID namespace; or (`as_uid`) the zygote as that uid. Sends
    {"event": "forked"} once it is there, or exits without a word when the kernel refuses; never
    returns."""
    code = 70
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        from sandbox.zygote import close_fds_except
        close_fds_except({0, 1, 2, control.fileno()})
        if as_uid is not None:
            os.setsid()
            os.chdir(cwd or "/")
            os.setgroups([])
            os.setgid(as_uid)
            os.setuid(as_uid)
            _serve_forked(control, env, preload)
        if cgroup is not None:
            cgroup.enter()
        uid, gid = os.geteuid(), os.getegid()
        own = _NEWPID | _NEWNET | _NEWIPC | _NEWNS | (_NEWUSER if uid != 0 else 0)
        if libc.unshare(own) != 0:
            os._exit(code)
        if uid != 0:  # --map-root-user: root inside, this user outside
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        pid = os.fork()
        if pid:  # --fork: wait for the zygote; killed, it takes the zygote with it (PDEATHSIG)
            control.close()
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            os._exit(code if code >= 0 else 128 - code)
        # (its parent is outside its PID namespace: getppid() says 0; a zygote whose parent died
        # before this line ends when the harness's socket closes)
        libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
        # --mount-proc: the workers' /proc shows this PID namespace alone, not the harness's fds
        if (libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0
                or libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0):
            os._exit(code)
        _serve_forked(control, env, preload)
    except BaseException:  # a forked child never falls back into its parent's code
        pass
    os._exit(code)


def _serve_forked(control: socket.socket, env: dict, preload: bool) -> None:
    """The forked zygote's environment is `env` alone; it says it is there, and serves until the
    harness's socket closes; never returns."""
    os.environ.clear()
    os.environ.update(env)
    control.settimeout(None)
    control.send(json.dumps({"event": "forked"}).encode())
    from sandbox import zygote
    zygote.forked(control, preload=preload)
    os._exit(0)


def zygote_command(fd: int, warm: tuple[str, ...] | None = None) -> list[str]:
    """How a zygote is started, commanded through socket `fd` (-P: the worker's folder must never
    shadow a module the zygote imports); `warm`: the warm-up sources it runs first."""
    from sandbox.zygote import encode_sources
    return [sys.executable, "-P", "-m", "sandbox.zygote", str(fd),
            *(["--warm", encode_sources(warm)] if warm is not None else [])]


# glibc's allocator, set for a grade's processes (here, and in the Docker backend's containers): a
# grade makes and drops thousands of tensors of a few hundred KB to a few MB, and by default glibc
# hands the top of its heap back to the kernel whenever a little more than the largest of them is
# free there, then takes it back for the next tensor, each page faulted in and zeroed again (over
# a quarter of a warm grade's CPU was the kernel's). Kept, the memory is reused. A block over 32 MB
# still gets pages of its own and gives them back when freed; at most 256 MB freed in smaller
# blocks stays with a process, far under a worker's memory limit.
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
                 "MALLOC_TOP_PAD_": str(64 << 20)}


def zygote_env() -> dict:
    """The zygote's (and so every worker's) environment: only what Python and torch need, and the
    allocator's setting above."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return {**env, **ALLOCATOR_ENV}


_PREFIX_CACHE: list | None = None


def namespace_prefix() -> list[str] | None:
    """The `unshare` command that puts the zygote in new PID, network and IPC namespaces, if it works."""
    global _PREFIX_CACHE
    if _PREFIX_CACHE is not None:
        return _PREFIX_CACHE or None
    tool = shutil.which("unshare")
    # --mount-proc: the workers' /proc shows only their own namespace, not the harness's fds.
    # --ipc: System V shared memory and semaphores stay inside the grade.
    isolated = ["--net", "--pid", "--ipc", "--fork", "--kill-child", "--mount", "--mount-proc"]
    candidates = [isolated, ["--net", "--pid", "--ipc", "--fork", "--kill-child"]]
    if os.geteuid() != 0:
        candidates[:0] = [["--user", "--map-root-user", *isolated],
                          ["--user", "--map-root-user", "--net", "--pid", "--ipc", "--fork", "--kill-child"]]
    if tool:
        for flags in candidates:
            probe = subprocess.run([tool, *flags, "true"], capture_output=True)
            if probe.returncode == 0:
                _PREFIX_CACHE = [tool, *flags]
                return _PREFIX_CACHE
    _PREFIX_CACHE = []
    return None


class _OutputDrain:
    """Reads what the worker prints, keeps the start of it, and flags a flood."""

    KEEP = 4096

    def __init__(self, fd: int, limit: int):
        self.fd, self.limit = fd, limit
        self.kept = bytearray()
        self.total = 0
        self.flooded = threading.Event()
        self.on_flood: Callable[[], None] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                break
            self.total += len(chunk)
            room = self.KEEP - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            if self.total > self.limit and not self.flooded.is_set():
                self.flooded.set()
                if self.on_flood:
                    self.on_flood()
        os.close(self.fd)

    def text(self) -> str:
        return self.kept.decode(errors="replace")
