"""Grading inside the grader image: the harness runs as the image's `grader` user, the zygote and the
student's workers as a uid drawn for this container alone (sandbox.confine.student_id), and this
process (root, with CAP_SETUID/CAP_SETGID only in the Docker backend) holds the report.

The student's uid is not the image's: containers without a user namespace share the host's uids,
and the kernel counts RLIMIT_NPROC per uid across all of them. With one `student` uid in every
container, the processes of a grade running beside (or of any host process with that uid) counted
against this grade's limit, so that its workers could not start a thread and every test failed.

Two ways in:
- `python -m sandbox.container`, the image's entry point for the Docker backend: grades
  /work/job.json and writes the report to the container's stdout, which only this process holds;
- the `image` backend (`ImageSandbox`), for platforms that run the image themselves, such as
  PrairieLearn's external grader (`grade platform prairielearn`).

Nothing the student's code writes can become the report: the harness writes it into a pipe that only
it and this process hold. When the harness is done (or the wall clock runs out), every process of the
student's uid is killed before the report is used.
"""
from __future__ import annotations

import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import tempfile
import time

from sandbox.backend import SCRIPT_NAME, ColdSlot, Job, RunResult
from sandbox.confine import student_id
from sandbox.launch import Launched, fork_harness, kill_and_reap, kill_group, run_harness
from sandbox.limits import Limits
from sandbox.tidy import remove_tree
from sandbox.zygote_client import Zygote, zygote_command, zygote_env

HARNESS_USER = "grader"
JOB = "/work/job.json"
WARM_UP = "/work/warmup.json"   # the exercise's warm-up sources, run before the zygote is forked
SCRATCH = "/tmp"
IMAGE_MARKER = "/etc/attention-grader-image"   # written by the Dockerfile


def run_job(job: dict, wall_s: float, forked: Zygote | None = None, uid: int | None = None,
            warm: tuple[str, ...] = ()) -> RunResult:
    """Run the harness on `job` (its `submission` readable by both users): its report, or why none.
    `forked`: the student's zygote, forked from this process before it read the job (main()); the
    harness is then a fork of this process too, so that torch is imported once for both; `uid` is
    the student's uid it runs as. `warm`: the warm-up sources a zygote started here runs first."""
    started = time.monotonic()
    uid = student_id() if uid is None else uid
    if forked is None:
        parent, _ = start_student_zygote(uid, warm=warm or None)
    else:
        parent = forked.control
    job = {**job, "zygote": {"fd": parent.fileno()}, "scratch": SCRATCH}

    def launch(write_fd: int) -> Launched:
        harness = subprocess.Popen([sys.executable, "-P", "-m", "sandbox.harness", "-", str(write_fd)],
                                   pass_fds=[write_fd, parent.fileno()], user=HARNESS_USER,
                                   group=HARNESS_USER, extra_groups=[], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, cwd=os.path.dirname(job["submission"]),
                                   start_new_session=True)
        parent.close()
        assert harness.stdin is not None  # stdin=PIPE
        try:
            harness.stdin.write(json.dumps(job).encode())
            harness.stdin.close()
        except BrokenPipeError:
            pass

        def stop() -> int | None:
            code = kill_group(harness)
            kill_uid(uid)
            return code
        return Launched(stop=stop)

    def launch_forked(write_fd: int) -> Launched:
        pid = fork_harness(job, write_fd, then=_as_harness_user)
        parent.close()

        def stop() -> int | None:
            code = kill_and_reap(pid)
            kill_uid(uid)
            return code
        return Launched(stop=stop)
    return run_harness(launch if forked is None else launch_forked, wall_s, started=started)


def _as_harness_user() -> None:
    become(HARNESS_USER)
    os.environ["HOME"] = tempfile.gettempdir()


def start_student_zygote(uid: int, warm: tuple[str, ...] | None = None) -> tuple[socket.socket, subprocess.Popen]:
    """A zygote running as the student's `uid` (and the same gid), and the socket that commands it."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    process = subprocess.Popen(zygote_command(child.fileno(), warm),
                               pass_fds=[child.fileno()], user=uid, group=uid,
                               extra_groups=[], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=SCRATCH, env=zygote_env(),
                               start_new_session=True)
    child.close()
    return parent, process


def become(user: str | int) -> None:
    """Drop this process to `user` (a name, or a uid that is its own gid too) for good: its user
    and group IDs, and no other group."""
    uid, gid = (user, user) if isinstance(user, int) else (pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`: whatever the student's code left running, daemons too."""
    pid = os.fork()
    if pid == 0:
        try:
            become(uid)
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, except this one
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


class ImageSandbox:
    """Grades inside the grader image, without starting a container: for platforms that run the
    image themselves. Only offered where the image's marker file exists."""
    name = "image"
    contained = False  # the platform's container is this machine: its folders are there

    def check(self) -> None:
        """Offered only inside the image, where it always runs."""

    def weaknesses(self, *, serving: bool = False) -> list[str]:
        """None: the image's users and the container's limits are the boundary."""
        return []

    def warm(self, prepare: list[dict]) -> ColdSlot:
        return ColdSlot(self)  # a platform's container grades one submission, then goes

    def close(self) -> None:
        pass

    def run(self, job: Job) -> RunResult:
        work = tempfile.mkdtemp(prefix="grade-")
        try:
            os.chmod(work, 0o755)
            script = os.path.join(work, SCRIPT_NAME)
            with open(script, "wb") as f:
                f.write(job.source)
            os.chmod(script, 0o444)
            return run_job(job.to_harness(script), job.limits.wall_s, warm=job.warm_ups)
        finally:
            remove_tree(work)  # however the student's code shaped it (sandbox.tidy)


def main() -> int:
    """The Docker backend's entry point: the job from /work, the report to stdout. Torch is
    imported once, here: the student's zygote is a fork of this process made before the job (its
    seed) is read, and the harness a fork made after."""
    from sandbox.zygote import single_threaded_torch, warm_up_from
    single_threaded_torch()
    sources = warm_up_from(WARM_UP)
    uid = student_id()
    forked = Zygote.fork(as_uid=uid, cwd=SCRATCH, preload=True,
                         fallback=lambda: Zygote(*start_student_zygote(uid, warm=sources or None), []))
    with open(JOB) as f:
        job = json.load(f)
    wall_s = Limits.from_dict(job.get("limits", {})).wall_s   # the host always sends its limits
    run = run_job(job, wall_s, forked, uid)
    if run.report is None:
        sys.stderr.write(f"{run.failure}\n")  # the host's log; the host words the failure itself
        return 1
    sys.stdout.write(json.dumps(run.report))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
