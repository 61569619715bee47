"""The student's code never reaches the grader's terminal: a student grading on a laptop types
ahead while the grade runs, and that line must still be theirs afterwards, with echo still on."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
import termios
import threading
import time

import pytest

from tests.support.grading import SUBMISSIONS

SANDBOXES = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]
TYPED = b"a line typed ahead during the grade\n"


def _as_terminal(slave: int):
    def become_its_session():  # the CLI gets the pseudo-terminal as its controlling terminal
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    return become_its_session


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_graders_terminal_keeps_its_typed_ahead_line_and_its_echo(sandbox):
    master, slave = pty.openpty()
    screen = bytearray()
    drain = threading.Thread(target=lambda: _drain(master, screen), daemon=True)
    drain.start()
    try:
        os.write(master, TYPED)   # typed before the grade starts
        proc = subprocess.Popen([sys.executable, "-m", "grader", str(SUBMISSIONS / "attacks" / "read_the_terminal.py"),
                                 "--json", "-", "--sandbox", sandbox],
                                stdin=slave, stdout=subprocess.PIPE, stderr=slave,
                                preexec_fn=_as_terminal(slave))
        time.sleep(1.5)
        os.write(master, TYPED)   # and while it runs
        out, _ = proc.communicate(timeout=240)
        result = json.loads(out)
        assert proc.returncode == 0 and result["status"] == "graded", result.get("message")
        assert termios.tcgetattr(slave)[3] & termios.ECHO, "the student's code turned the terminal's echo off"
        os.set_blocking(slave, False)
        left = b""
        try:
            while chunk := os.read(slave, 4096):
                left += chunk
        except BlockingIOError:
            pass
        assert left == TYPED * 2, f"the typed-ahead lines were read by someone else: {left!r} is left"
        # Its correct layer keeps the interface, the properties and the count; its reaching for the
        # grader's descriptors (the fds of its parent and of PID 1) is refused and named, which costs
        # the comparison tests (sandbox.audit), as any refused route does.
        assert result["score"] < 100 and "descriptors" in json.dumps(result["bugs"]), result["bugs"]
    finally:
        os.close(slave)
        os.close(master)


def _drain(fd: int, into: bytearray) -> None:
    """Read what the CLI shows on the terminal, so that it never blocks writing it."""
    try:
        while chunk := os.read(fd, 4096):
            into += chunk
    except OSError:
        pass
