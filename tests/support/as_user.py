"""Run a command as an ordinary user, from a test that runs as root (CI does):

    python -m tests.support.as_user UID -- COMMAND...

The Python this project runs on may lie in a folder other users cannot enter (pyenv under /root,
0700); the command gets a mount namespace of its own in which that Python is reachable and nothing
else of such folders exists (sandbox.confine.open_to_others, the same step the local sandbox takes
for a student's uid), then runs as UID and its own gid, with no supplementary group. The host's
mounts and modes are not changed.
"""
from __future__ import annotations

import os
import sys

NOBODY = 65534


def command(uid: int, *argv: str) -> list[str]:
    """The command line that runs `argv` as `uid` (a test passes it to subprocess)."""
    return [sys.executable, "-m", "tests.support.as_user", str(uid), "--", *argv]


def main() -> None:
    from sandbox.confine import open_to_others, worker_reads
    uid, rest = int(sys.argv[1]), sys.argv[sys.argv.index("--") + 1:]
    if os.geteuid() != 0:
        sys.exit("tests.support.as_user: must be started as root")
    out_of_reach = open_to_others([*worker_reads(), os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))])
    if out_of_reach:
        sys.exit(f"tests.support.as_user: cannot make {', '.join(out_of_reach)} reachable to uid {uid}")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    os.execvp(rest[0], rest)


if __name__ == "__main__":
    main()
