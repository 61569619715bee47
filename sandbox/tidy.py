"""Removing a folder the student's code wrote in, however it is shaped.

`shutil.rmtree` and `os.walk` recurse once per level of folders (Python 3.11): a submission that
nests a few thousand folders in its scratch space makes them raise RecursionError, which escapes
`ignore_errors=True`, and the grade that should have been cleaned up ends as the grader's fault.
A path nested past PATH_MAX cannot be named from the top at all. `remove_tree` walks with one
directory descriptor at a time (never one per level, so a deep tree cannot exhaust the descriptor
limit either), names every entry relative to its folder's descriptor, never follows a symbolic
link, and gives a folder the student left unreadable back its owner's access before it looks in.
Stdlib only: the sandbox's processes import it.
"""
from __future__ import annotations

import os
import stat

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_child(parent: int, name: str) -> int | None:
    """A descriptor of the folder `name` in `parent`, made readable first if it must be."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except PermissionError:
        pass
    except OSError:
        return None
    try:  # its owner's access back: by an O_PATH descriptor, so no symbolic link is followed
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.chmod(f"/proc/self/fd/{fd}", 0o700)
        finally:
            os.close(fd)
        return os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError:
        return None


def remove_tree(path: str | os.PathLike, *, keep_top: bool = False, owner: int | None = None) -> bool:
    """Remove `path` and everything under it (`keep_top`: empty it, keep the folder itself;
    `owner`: only entries of that uid, the others and what they hold stay). Errors are not raised:
    True when nothing that was to go is left."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        if keep_top or (owner is not None and st.st_uid != owner):
            return True
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False
    try:
        fd = os.open(path, _DIRECTORY)
    except OSError:
        return False
    complete = True
    names: list[str] = []       # the way down from `path`, one name per level: no descriptor is held for it
    kept: list[set[str]] = [set()]  # per level, the folders that stay: not entered again
    while True:
        child = None
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        if entry.name in kept[-1]:
                            continue
                        child = _open_child(fd, entry.name)
                        if child is None:
                            kept[-1].add(entry.name)
                            complete = False
                            continue
                        names.append(entry.name)
                        kept.append(set())
                        break
                    if owner is not None and info.st_uid != owner:
                        continue
                    try:
                        os.unlink(entry.name, dir_fd=fd)
                    except FileNotFoundError:
                        pass
                    except OSError:
                        complete = False
        except OSError:
            complete = False
        if child is not None:
            os.close(fd)
            fd = child
            continue
        # This folder holds nothing more that can go: up one level, and remove it from there.
        if not names:
            break
        try:
            parent = os.open("..", _DIRECTORY, dir_fd=fd)
            mine = owner is None or os.fstat(fd).st_uid == owner
        except OSError:
            complete = False
            break
        os.close(fd)
        fd = parent
        name = names.pop()
        kept.pop()
        if not mine:  # another owner's folder stays, with whatever of theirs it holds
            kept[-1].add(name)
            continue
        try:
            os.rmdir(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError:
            kept[-1].add(name)
            complete = False
    os.close(fd)
    if keep_top or not complete or (owner is not None and st.st_uid != owner):
        return complete
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True
