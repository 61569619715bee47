"""The zygote: a process that imported torch and forks student workers.

Forking from it makes a fresh worker cost milliseconds instead of a torch import. It never runs
a tensor op on more than one thread, since a process that has used torch's thread pool forks
children that hang (measured with torch 2.13); a warm sandbox's zygote (--warm) runs a few
single-threaded ops first, so that its workers find torch's lazy set-up done (warm_up_torch). Where the OS allows, the harness starts it as PID 1 of new PID and
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

from sandbox import limits as limits_mod
from sandbox.confine import confine


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    import numpy  # noqa: F401  (torch warns when numpy is missing; import it once here)
    import torch  # noqa: F401  (imported; ops only on one thread: see the module docstring)
    preload_lazy_torch_modules()
    if "--warm" in sys.argv[2:]:
        warm_up_torch()
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
                answer = {"pid": _spawn(command, fds, control)}
            except OSError as err:  # fork refused: the process limit is full
                answer = {"error": f"cannot start a worker: {err.strerror}"}
            for fd in fds:
                os.close(fd)
            _send(control, answer)
        elif op == "kill":
            _kill(command["pid"])
            _wait_status(command["pid"], statuses, 1.0)
            _send(control, {"ok": True})
        elif op == "status":
            _send(control, {"status": _wait_status(command["pid"], statuses, command.get("wait_s", 0.5))})
        elif op == "reset":
            clean = _reset(command.get("scope"), statuses)
            if clean and command.get("scope") == "uid":
                clean = _remove_own_files(command.get("wipe") or ())
            _send(control, {"reset": command.get("id"), "clean": clean})
        else:
            _send(control, {"error": f"unknown op {op}"})


def preload_lazy_torch_modules() -> None:
    """Import what torch 2.13 would import on the first backward through softmax or the first
    masked nn.MultiheadAttention call (sympy, via symbolic_shapes): 0.4 s that every forked
    worker would otherwise pay again. An import, not an op, so forking stays safe."""
    import torch.fx.experimental.symbolic_shapes  # noqa: F401


def warm_up_torch() -> None:
    """Run, once and on one thread, the kinds of op a grade starts with (linear layers, masked
    softmax attention, nn.MultiheadAttention with masks, SDPA, einsum, backward, a Jacobian, a meta
    device op, in float32 and float64), so that every process forked from this one finds torch's
    lazy set-up done. Used by warm sandboxes, whose zygote and harness server fork one process per
    grade. Forking after ops is safe only because none ran on more than one thread (measured with
    torch 2.13: after a multi-threaded op, a forked child hangs in its first parallel op; after
    single-threaded ops, children run normally, even with more threads). The random number
    generator is left as it was."""
    import torch
    import torch._dynamo  # noqa: F401  (what the first meta-device op imports: 0.8 s)
    import torch.nn.functional as F
    single_threaded_torch()
    with torch.random.fork_rng(devices=[]):
        for dtype in (torch.float32, torch.float64):
            x = torch.randn(2, 5, 8, dtype=dtype, requires_grad=True)
            layer = torch.nn.Linear(8, 24, dtype=dtype)
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=dtype)
            padding = torch.zeros(2, 5, dtype=torch.bool)
            padding[1, 3:] = True
            future = torch.ones(5, 5, dtype=torch.bool).triu(1)
            out, _ = mha(x, x, x, key_padding_mask=padding, attn_mask=future, need_weights=False)
            q, k, v = layer(x).split(8, dim=2)
            q, k, v = (t.view(2, 5, 2, 4).transpose(1, 2) for t in (q, k, v))
            weights = (q @ k.transpose(-2, -1) / 2.0).masked_fill(future, float("-inf")).softmax(dim=-1)
            mixed = (weights @ v).transpose(1, 2).contiguous().view(2, 5, 8)
            sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            total = out.sum() + mixed.sum() + sdpa.sum() + torch.einsum("bhtd,bhsd->bhts", q, k).sum()
            total.backward()
            torch.autograd.functional.jacobian(lambda z: z.softmax(-1), torch.randn(3, dtype=dtype))
        layer.to("meta")(torch.empty(2, 8, device="meta"))


def single_threaded_torch() -> None:
    """One intra-op thread: the tests' tensors are tiny, and with several grades at once (a batch)
    each grade's extra threads only wait on the others' (measured: 2 grades on 2 cores took 3x as
    long with torch's default thread count as with one)."""
    import torch
    torch.set_num_threads(1)


def _spawn(command: dict, fds: list[int], control: socket.socket) -> int:
    req_fd, resp_fd, out_fd = fds
    pid = os.fork()
    if pid:
        return pid
    # The child: becomes the student worker and never returns to the loop above.
    try:
        control.close()
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        keep = {0, 1, 2, req_fd, resp_fd}
        for fd in _open_fds():
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        os.chdir(command["cwd"])
        notes = limits_mod.apply_to_current_process(limits_mod.Limits.from_dict(command["limits"]),
                                                    processes_capped=bool(command.get("processes_capped")),
                                                    really_root=bool(command.get("really_root", True)))
        os.environ.update(TMPDIR=command["cwd"], HOME=command["cwd"])
        single_threaded_torch()
        notes += confine(writable=[command["cwd"]], hidden=list(command.get("hidden") or ()))
        from sandbox import worker
        worker.serve(req_fd, resp_fd, command["path"], worker.EntrySpec.from_dict(command["entry"]),
                     notes=notes)
        code = 0
    except BaseException:  # last resort in a forked child: never fall back into the zygote's loop
        code = 70
    os._exit(code)


def _open_fds() -> list[int]:
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


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


def _reset(scope: str | None, statuses: dict[int, int], wait_s: float = 5.0) -> bool:
    """Kill every process this zygote can signal but itself, for the next submission of a warm
    sandbox; True once none is left. Only where that set is exactly the student's processes: as
    PID 1 of a PID namespace ("namespace"), or as a user that exists only for the student ("uid",
    never root). Elsewhere it kills nothing and answers False, and the caller starts a new zygote."""
    if scope == "namespace" and os.getpid() != 1 or scope == "uid" and os.getuid() == 0 \
            or scope not in ("namespace", "uid"):
        return False
    end = time.monotonic() + wait_s
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process we may signal, except ourselves
        except ProcessLookupError:
            pass
        _wait_status(0, statuses, 0)
        if not _others_alive(scope):
            statuses.clear()
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)


def _remove_own_files(roots) -> bool:
    """Remove what this (non-root) user made under `roots`; True when nothing of it is left."""
    uid, left = os.getuid(), False
    for root in roots:
        for folder, dirs, files in os.walk(root, topdown=False):
            for name in files + dirs:
                path = os.path.join(folder, name)
                try:
                    if os.lstat(path).st_uid != uid:
                        continue
                    if name in dirs and not os.path.islink(path):
                        os.rmdir(path)
                    else:
                        os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    left = True
    return not left


def _others_alive(scope: str) -> bool:
    """Whether any process but this one is left: in a PID namespace every process is our
    descendant, so having no child left is enough; as the student's user, /proc tells."""
    if scope == "namespace":
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        return True
    uid, me = os.getuid(), os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            if int(fields.get("Uid", "-1").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
                return True
    return False


def _send(control: socket.socket, message: dict) -> None:
    control.send(json.dumps(message).encode())


if __name__ == "__main__":
    main()
