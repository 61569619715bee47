"""The registry of sandbox backends: the one module that imports their implementations, so that
none of them imports another's, and the grader names none of them. A new backend (a Kubernetes Job,
say) is one module implementing sandbox.backend.Sandbox and one line in available()."""
from __future__ import annotations

import os

from sandbox.backend import Sandbox
from sandbox.errors import GraderError


class UnknownSandbox(GraderError, LookupError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        super().__init__(f"unknown sandbox {name!r}; known: {', '.join(known)}")


DEFAULT = "local"  # what `grade FILE` uses: it needs nothing but this Python


def platform_default() -> str:
    """The sandbox a platform's entry point uses: inside the grader image, the image's own two
    users; elsewhere the default."""
    from sandbox.container import ImageSandbox
    return ImageSandbox.name if ImageSandbox.name in available() else DEFAULT


def available() -> dict[str, type]:
    """Backends by name: those that can exist on this machine."""
    from sandbox.container import IMAGE_MARKER, ImageSandbox
    from sandbox.docker import DockerSandbox
    from sandbox.local import LocalSandbox
    found = {LocalSandbox.name: LocalSandbox, DockerSandbox.name: DockerSandbox}
    if os.path.exists(IMAGE_MARKER):  # inside the grader image: grade with its two users
        found[ImageSandbox.name] = ImageSandbox
    return found


def get(name: str) -> Sandbox:
    """A new backend called `name`; raises UnknownSandbox."""
    backends = available()
    if name not in backends:
        raise UnknownSandbox(name, sorted(backends))
    return backends[name]()
