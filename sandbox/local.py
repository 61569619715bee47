"""The local backend: the harness in a subprocess on this machine, under a wall-clock limit.

The student worker gets the rlimits and, on Linux, new PID and network namespaces (see
sandbox.zygote); the harness itself is trusted and only bounded in time. Its warm slot is a
long-lived server process on this machine (sandbox.warm_server).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from sandbox.backend import SCRIPT_NAME, Job, RunResult
from sandbox.launch import Launched, Tail, kill_group, run_harness
from sandbox.tidy import remove_tree
from sandbox.warm import WarmSandbox
from sandbox.zygote_client import zygote_env


class LocalSandbox:
    """Runs `python -m sandbox.harness` in a scratch folder that is removed afterwards, and which is
    the grade's own temporary root (TMPDIR): nothing of a grade lands in the machine's /tmp."""
    name = "local"
    contained = False

    def check(self) -> None:
        """Always usable: it needs only this Python (weaknesses() says what it then lacks)."""

    def weaknesses(self, *, serving: bool = False) -> list[str]:
        """The guarantees this kernel and this user cannot give the student's code a boundary with
        (see the README's "The local sandbox as a boundary")."""
        return local_weaknesses(serving=serving)

    def run(self, job: Job) -> RunResult:
        scratch = tempfile.mkdtemp(prefix="grade-")
        try:
            work = os.path.join(scratch, "work")
            os.mkdir(work)
            script = os.path.join(work, SCRIPT_NAME)
            with open(script, "wb") as f:
                f.write(job.source)
            job_file = os.path.join(scratch, "job.json")
            with open(job_file, "w") as out:  # the machine's temp folder stays hidden from the student
                json.dump(job.to_harness(script, hidden=(tempfile.gettempdir(),)), out)
            warm_file = os.path.join(scratch, "warmup.json")  # the exercise's, run before the zygote's fork
            with open(warm_file, "w") as out:
                json.dump(job.warm_ups, out)

            def launch(write_fd: int) -> Launched:
                # The grade's own temporary root: whatever the harness and the workers make goes there.
                # Its zygote is a fork of it, made after the exercise's warm-up: an environment of what
                # Python and torch need alone
                process = subprocess.Popen(
                    [sys.executable, "-P", "-m", "sandbox.harness", job_file, str(write_fd), "--fork-zygote", "--warm", warm_file],
                    pass_fds=[write_fd], cwd=scratch, stdin=subprocess.DEVNULL, env={**zygote_env(), "TMPDIR": scratch},
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
                log = Tail(process.stderr)
                return Launched(stop=lambda: kill_group(process), log=log.text)
            return run_harness(launch, job.limits.wall_s)
        finally:
            remove_tree(scratch)  # however the student's code shaped it (sandbox.tidy)

    def warm(self, prepare: list[dict]) -> WarmLocal:
        return WarmLocal(prepare)

    def close(self) -> None:
        """Nothing outlives a run."""


class WarmLocal(WarmSandbox):
    """The warm server as a child process of this one, in its own session."""
    backend = "local"

    def _open(self):
        # Only what Python and torch need in its environment: its zygote is a fork of it, and the
        # student's code may read what the zygote holds (a host's keys and secrets stay out).
        self.process = subprocess.Popen([sys.executable, "-P", "-m", "sandbox.warm_server", *self._prepare_args()],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        start_new_session=True, env=zygote_env())
        return iter(lambda: self.process.stdout.read1(1 << 16), b"")

    def _write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def _stop(self) -> None:
        kill_group(self.process)
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass


DOCKER_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")


def local_weaknesses(*, serving: bool = False) -> list[str]:
    """What the local sandbox lacks here, a line each: Landlock, the seccomp filter, new PID and
    network namespaces, and (as root) a mount namespace where Python is out of other users' reach;
    with `serving`, also root on a machine whose Docker socket exists (a worker or service there
    is where one kernel hole gives away every container of the host: grade in --sandbox docker)."""
    import platform

    from sandbox.confine import TABLES, initial_user_namespace, landlock_abi, reachable_by_others, worker_reads
    from sandbox.zygote_client import namespace_prefix
    if not sys.platform.startswith("linux"):
        return [f"not Linux ({sys.platform}): no Landlock, seccomp or namespaces confine the student's code"]
    found = []
    if landlock_abi() < 1:
        found.append("no Landlock (Linux 5.13+): the student's code could read and write what this user can")
    if platform.machine() not in TABLES or not os.path.exists("/proc/sys/kernel/seccomp/actions_avail"):
        found.append(f"no seccomp filter for {platform.machine()}: metadata changes and sockets stay open")
    prefix = namespace_prefix()
    if prefix is None:
        found.append("no new PID and network namespaces (unshare): the student's code could reach the network "
                     "and signal this user's processes")
    root = os.geteuid() == 0 and initial_user_namespace()
    if root and "--mount" not in (prefix or []) and not all(reachable_by_others(p) for p in worker_reads()):
        found.append("running as root without a mount namespace, with Python in a folder other users cannot "
                     "enter: the student's code would run as root")
    if serving and root and any(os.path.exists(s) for s in DOCKER_SOCKETS):
        found.append("running as root on a machine with a Docker socket: a worker or service here grades in "
                     "--sandbox docker")
    return found
