"""Resource limits for one grade, and how they are applied to a student worker process."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Budgets for one submission. Defaults suit a small PyTorch exercise on a laptop."""
    wall_s: float = 90.0          # the whole grade, sandbox start to report
    tests_s: float = 45.0         # all calls into the student's code, summed, after import
    import_s: float = 20.0        # importing the submission (torch is already imported)
    call_s: float = 4.0           # one request to the worker (a correct solution needs milliseconds)
    max_timeouts: int = 3         # after this many timed-out calls, the rest fail without running
    memory_bytes: int = 3072 * MiB  # address space of the worker (torch alone maps ~0.5 GiB)
    cpu_s: int = 60               # CPU seconds of one worker process
    file_bytes: int = 16 * MiB    # largest file the worker may write
    processes: int = 64           # processes and threads the worker may add (where enforceable)
    output_bytes: int = 2 * MiB   # what the worker may print before it is killed

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Limits":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def apply_to_current_process(limits: Limits) -> list[str]:
    """Set the rlimits in a freshly forked worker; return notes on limits the OS did not take."""
    notes: list[str] = []
    try:
        import resource
    except ImportError:  # not a POSIX system
        return ["no resource limits on this OS"]
    wanted = {
        "RLIMIT_CPU": limits.cpu_s,
        "RLIMIT_AS": limits.memory_bytes,
        "RLIMIT_FSIZE": limits.file_bytes,
        "RLIMIT_CORE": 0,
    }
    if os.geteuid() != 0:
        # RLIMIT_NPROC counts every process of the user, so leave room for the ones already running.
        wanted["RLIMIT_NPROC"] = _threads_of_current_user() + limits.processes
    else:
        notes.append("process-count limit not enforced: running as root ignores RLIMIT_NPROC")
    for name, value in wanted.items():
        which = getattr(resource, name, None)
        if which is None:
            notes.append(f"{name} not available on this OS")
            continue
        try:
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError) as err:
            notes.append(f"{name} not set: {err}")
    return notes


def _threads_of_current_user() -> int:
    uid = str(os.getuid())
    count = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 256
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [uid]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count
