"""Resource limits for one grade, and how they are applied to a student worker process."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from sandbox.codec import Record
from sandbox.errors import GraderError

MiB = 1 << 20


@dataclass(frozen=True)
class Limits(Record):
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
    harness_memory_bytes: int = 3072 * MiB  # address space of the harness (about 0.8 GiB after its imports)
    # The audit layer in the student's process (sandbox.audit). Off only where the host's operator
    # says so (grader.grading.KERNEL_LAYER_ONLY), to test the kernel's layers beneath it alone.
    audit: bool = True


def apply_to_current_process(limits: Limits, *, processes_capped: bool = False,
                             really_root: bool = True, new_uid: bool = False) -> list[str]:
    """Set the rlimits in a freshly forked worker; return notes on limits the OS did not take.
    `processes_capped`: a pids cgroup around the zygote already limits the process count.
    `really_root`: False when uid 0 is only a user namespace's mapping of an ordinary user, for
    whom the kernel does enforce RLIMIT_NPROC. `new_uid`: this root process is about to become a
    uid of its own that runs nothing yet (sandbox.confine.become_student), whose count the kernel
    enforces."""
    _prefer_as_oom_victim()
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
    if new_uid:
        wanted["RLIMIT_NPROC"] = 1 + limits.processes
    elif os.geteuid() != 0 or not really_root:
        # RLIMIT_NPROC counts every process of the user, so leave room for the ones already running.
        wanted["RLIMIT_NPROC"] = _threads_of_current_user() + limits.processes
    elif not processes_capped:
        notes.append("process-count limit not enforced: running as root ignores RLIMIT_NPROC "
                     "and no pids cgroup could be made")
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


class HarnessLimit(GraderError):
    """The harness itself ran into its time or CPU limit while handling what the student sent."""


def guard_harness(limits: Limits, alarm_at: float) -> None:
    """Limits for the harness's own process, so that nothing a submission makes it do (a huge
    answer, a source that makes a check quadratic) ends it without a report: its address space
    (MemoryError instead of the OOM killer), its CPU time, and an alarm shortly before the wall
    clock (`alarm_at`, time.monotonic()). The CPU limit and the alarm raise HarnessLimit in whatever
    the harness is doing (a test, which then fails with that message); the report is still written."""
    import resource
    import signal

    def stop(what: str):
        def handler(_signum, _frame):
            raise HarnessLimit(what)
        return handler
    soft_cpu = int(limits.wall_s) + 1
    for which, value in ((resource.RLIMIT_AS, (limits.harness_memory_bytes,) * 2),
                         (resource.RLIMIT_CPU, (soft_cpu, soft_cpu + 10))):
        try:
            hard = resource.getrlimit(which)[1]
            soft, top = (v if hard == resource.RLIM_INFINITY else min(v, hard) for v in value)
            resource.setrlimit(which, (soft, top))
        except (ValueError, OSError):
            pass  # a lower limit set by someone else stays
    signal.signal(signal.SIGXCPU, stop(f"the grader's own CPU time limit ({soft_cpu} s) was reached"))
    signal.signal(signal.SIGALRM, stop(f"the grade's time limit ({limits.wall_s:g} s) was reached while the "
                                       f"grader was checking your code or what it sent"))
    signal.setitimer(signal.ITIMER_REAL, max(alarm_at - time.monotonic(), 0.1))


def release_harness() -> None:
    """The tests are over: no alarm while the report is written."""
    import signal
    signal.setitimer(signal.ITIMER_REAL, 0)


def _prefer_as_oom_victim() -> None:
    """If memory runs out, the kernel should kill a student worker, never the harness."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


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


class PidsCgroup:
    """A pids cgroup around the zygote and every worker it forks. RLIMIT_NPROC does nothing for
    root, so this is what stops a fork bomb when the local sandbox runs as root."""

    ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")  # cgroup v1 pids hierarchy, then v2

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        """A new pids cgroup with this limit, or None where this process may not make one."""
        if os.geteuid() != 0:
            return None
        for root in cls.ROOTS:
            if not os.path.isfile(os.path.join(root, "cgroup.procs")):
                continue
            path = os.path.join(root, f"attention-grader-{os.getpid()}-{os.urandom(4).hex()}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            try:
                with open(os.path.join(path, "pids.max"), "w") as f:
                    f.write(str(max_pids))
                return cls(path)
            except OSError:
                os.rmdir(path)
        return None

    def enter(self) -> None:
        """Move the calling process into the cgroup (used between fork and exec)."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the cgroup once its processes are gone."""
        end = time.monotonic() + wait_s
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= end:
                    return
                time.sleep(0.02)
