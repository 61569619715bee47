"""sandbox.tidy.remove_tree: whatever shape of folder the student's code leaves in its scratch
space is removed after the grade, without an error that would void the grade (shutil.rmtree and
os.walk recurse once per level and raise RecursionError past about a thousand)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox.tidy import remove_tree
from tests.support.as_user import NOBODY, command

ROOT = Path(__file__).resolve().parent.parent

# The shapes, built in the folder `top` as the student's code would (one name at a time).
SHAPES = r'''
import os, sys

def nest(top, levels, name):
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        deeper = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.mkdir("shut", dir_fd=fd)
    os.close(os.open("shut/inside.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.chmod("shut", 0, dir_fd=fd)
    os.close(fd)

def build(top):
    nest(top, 3000, "n")
    nest(top, 40, "m" * 250)  # 40 levels of 251 characters: 10,000 characters, past PATH_MAX
    os.mkdir(os.path.join(top, "empty"))
    os.mkfifo(os.path.join(top, "fifo"))
'''
AS_A_PROGRAM = SHAPES + "\ntop = sys.argv[1]\nbuild(top)\n"


def _build(folder: Path) -> None:
    shapes: dict = {}
    exec(SHAPES, shapes)
    shapes["build"](str(folder))


@pytest.mark.unit
def test_a_tree_deeper_than_the_recursion_limit_and_past_path_max_is_removed(tmp_path):
    folder = tmp_path / "scratch"
    folder.mkdir()
    _build(folder)
    with pytest.raises(RecursionError):   # what it replaces, on this Python
        shutil.rmtree(folder, ignore_errors=True)
    assert remove_tree(folder) is True
    assert not folder.exists()


@pytest.mark.unit
def test_a_link_is_removed_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("not the grade's")
    folder = tmp_path / "scratch"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "to-outside").symlink_to(outside)
    (folder / "to-file").symlink_to(outside / "kept.txt")
    assert remove_tree(folder) is True
    assert not folder.exists() and (outside / "kept.txt").read_text() == "not the grade's"


@pytest.mark.unit
def test_emptying_keeps_the_folder_and_a_missing_one_is_no_error(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.txt").write_text("x")
    assert remove_tree(tmp_path / "a", keep_top=True) is True
    assert list((tmp_path / "a").iterdir()) == []
    assert remove_tree(tmp_path / "no such folder") is True


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to make files of two users")
def test_by_owner_only_that_users_entries_go():
    """As the container's reset removes a student's files from /tmp, leaving everyone else's."""
    folder = Path(tempfile.mkdtemp(prefix="tidy-owner-"))
    try:
        os.chmod(folder, 0o1777)
        (folder / "theirs").mkdir()
        (folder / "theirs" / "keep.txt").write_text("x")
        made = subprocess.run(command(NOBODY, sys.executable, "-c",
                                      f"import os; os.mkdir({str(folder / 'mine')!r})\n" + AS_A_PROGRAM, str(folder / "mine")),
                              timeout=120)
        assert made.returncode == 0
        assert remove_tree(folder, keep_top=True, owner=NOBODY) is True
        assert sorted(p.name for p in folder.iterdir()) == ["theirs"]
        assert (folder / "theirs" / "keep.txt").exists()
    finally:
        remove_tree(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run as an ordinary user")
def test_an_ordinary_user_removes_a_folder_it_made_unreadable():
    """Root reads any folder; an ordinary user must give its own shut folders their access back."""
    folder = Path(tempfile.mkdtemp(prefix="tidy-user-"))
    try:
        os.chmod(folder, 0o755)
        os.chown(folder, NOBODY, NOBODY)
        script = AS_A_PROGRAM + ("\nsys.path.insert(0, " + repr(str(ROOT)) + ")\nfrom sandbox.tidy import remove_tree\n"
                           "print(remove_tree(top, keep_top=True), os.listdir(top))\n")
        ran = subprocess.run(command(NOBODY, sys.executable, "-c", script, str(folder)), capture_output=True,
                             text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert ran.stdout.split() == ["True", "[]"], ran.stdout
    finally:
        remove_tree(folder)
