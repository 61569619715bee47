"""The Docker image's entry point: starts the zygote as `student` and the harness as `grader`,
then relays the harness's report to the container's stdout.

It runs as root with only CAP_SETUID and CAP_SETGID, which it uses once per child to switch user;
both children start without capabilities. Only this process holds the container's stdout, so
nothing the student's code writes can reach the host as a report: the harness writes its report
into a pipe that only it and this process hold.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from sandbox.proxy import zygote_env

HARNESS_USER, STUDENT_USER = "grader", "student"
JOB = "/work/job.json"
SCRATCH = "/tmp"


def main() -> int:
    with open(JOB) as f:
        job = json.load(f)
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    subprocess.Popen([sys.executable, "-P", "-m", "sandbox.zygote", str(child.fileno())],
                     pass_fds=[child.fileno()], user=STUDENT_USER, group=STUDENT_USER, extra_groups=[],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     cwd=SCRATCH, env=zygote_env())
    child.close()
    read_fd, write_fd = os.pipe()
    job.update(zygote_fd=parent.fileno(), scratch=SCRATCH)
    harness = subprocess.Popen([sys.executable, "-P", "-m", "sandbox.harness", "-", str(write_fd)],
                               pass_fds=[write_fd, parent.fileno()], user=HARNESS_USER,
                               group=HARNESS_USER, extra_groups=[], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, cwd="/work")
    os.close(write_fd)
    parent.close()
    harness.stdin.write(json.dumps(job).encode())
    harness.stdin.close()
    with os.fdopen(read_fd, "rb") as report:
        data = report.read()
    harness.wait()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0 if data else 1


if __name__ == "__main__":
    sys.exit(main())
