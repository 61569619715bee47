"""The Docker backend: a fresh, locked-down container per submission, through the Docker SDK.

The container has no network, limited memory, CPU and processes, a read-only root filesystem
with a small tmpfs, every capability dropped but the two the entry point needs to switch users,
and no new privileges. The submission goes in with put_archive (into a per-grade volume, since
the root filesystem is read-only); the report comes out of the entry point's stdout, which the
student's processes never hold. The container and the volume are removed whatever happens.
"""
from __future__ import annotations

import io
import json
import os
import tarfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

from sandbox.backend import (
    SCRIPT_NAME,
    Job,
    RunResult,
    SandboxUnavailable,
)
from sandbox.launch import outcome
from sandbox.warm import WarmSandbox
from sandbox.zygote_client import ALLOCATOR_ENV

DEFAULT_IMAGE = "attention-grader:latest"
MEMORY = "4g"           # the worker's own address-space limit (3 GiB) is hit first
CPUS = 2.0
PIDS = 256
TMPFS = {"/tmp": "size=64m,mode=1777,noexec,nosuid,nodev"}  # the scratch folders: nothing written there runs


class DockerSandbox:
    """Grades each job in a new container from the grader image."""
    name = "docker"
    contained = True

    def __init__(self, image: str | None = None):
        self.image = image or os.environ.get("GRADER_IMAGE", DEFAULT_IMAGE)

    def check(self) -> None:
        """Raises SandboxUnavailable, saying what to do, when the engine or the image is missing."""
        self.client()

    def weaknesses(self, *, serving: bool = False) -> list[str]:
        """None that this machine decides: the container's limits are the engine's."""
        return []

    def warm(self, prepare: list[dict]) -> WarmDocker:
        return WarmDocker(prepare, self.image)

    def close(self) -> None:
        """Every container and volume of a run is removed by the run itself."""

    def client(self):
        import docker
        try:
            client = docker.from_env(timeout=30)
            client.ping()
        except docker.errors.DockerException as err:
            raise SandboxUnavailable("the Docker engine is not reachable: start it (scripts/docker-engine "
                                    "on Debian) or set DOCKER_HOST") from err
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound as err:
            raise SandboxUnavailable(f"the image {self.image} is missing: build it with scripts/build-images") from err
        return client

    def run(self, job: Job) -> RunResult:
        import docker
        started = time.monotonic()
        client = self.client()
        tag = uuid.uuid4().hex[:12]
        volume = client.volumes.create(name=f"grade-{tag}", labels=labels("work"))
        container = None
        try:
            container = client.containers.create(
                self.image, name=f"grade-{tag}", labels=labels("grade"),
                volumes={volume.name: {"bind": "/work", "mode": "rw"}}, **container_options())
            container.put_archive("/work", _archive(job))
            container.start()
            try:
                container.wait(timeout=job.limits.wall_s)
                timed_out = False
            except Exception:  # requests' ReadTimeout or a connection error: the wall clock ran out
                timed_out = True
                container.kill()
            report_bytes = container.logs(stdout=True, stderr=False)
            log = container.logs(stdout=False, stderr=True)[-8192:].decode(errors="replace")
        except docker.errors.DockerException as err:
            return RunResult(None, time.monotonic() - started, f"Docker failed: {err}", "")
        finally:
            if container is not None:
                container.remove(force=True)
            volume.remove(force=True)
        return outcome(report_bytes, timed_out, job.limits.wall_s, None, time.monotonic() - started, log)


OWNER_LABEL = "attention-grader.owner"
# A queue worker's containers say which worker (its name, and this run of it) and which queue they
# serve (grader.queue sets these in the worker's environment), so that a worker can remove what a
# dead one left.
WORKER_LABELS = {"attention-grader.worker": "GRADER_WORKER_NAME",
                 "attention-grader.instance": "GRADER_WORKER_INSTANCE",
                 "attention-grader.queue": "GRADER_WORKER_QUEUE"}


def labels(kind: str) -> dict:
    """The labels of a grading container or volume: what it is, who asked for it (GRADER_OWNER,
    e.g. one test session), so that whoever looks for leftovers sees only their own, and the queue
    worker it belongs to, if any."""
    worker = {label: os.environ[env] for label, env in WORKER_LABELS.items() if os.environ.get(env)}
    return {"attention-grader": kind, OWNER_LABEL: os.environ.get("GRADER_OWNER", ""), **worker}


def remove_warm_of_dead(queue: str, alive) -> list[tuple[str, str]]:
    """Remove the warm containers of `queue` whose worker instance is not alive(instance); the
    (name, instance) of each one removed."""
    import docker
    removed = []
    client = docker.from_env(timeout=30)
    for container in client.containers.list(all=True, filters={"label": ["attention-grader=warm",
                                                                         f"attention-grader.queue={queue}"]}):
        instance = container.labels.get("attention-grader.instance", "")
        if instance and not alive(instance):
            try:
                container.remove(force=True)
                removed.append((container.name, instance))
            except docker.errors.NotFound:  # it was on its way out already
                pass
    return removed


def container_options() -> dict:
    """How every grading container is locked down (see the module docstring)."""
    return dict(network_mode="none", mem_limit=MEMORY, memswap_limit=MEMORY, nano_cpus=int(CPUS * 1e9),
                pids_limit=PIDS, read_only=True, tmpfs=dict(TMPFS), cap_drop=["ALL"],
                cap_add=["SETUID", "SETGID"], security_opt=["no-new-privileges"], user="root", detach=True,
                environment=dict(ALLOCATOR_ENV))


def _archive(job: Job) -> bytes:
    """A tar of the submission, owned by root and readable by everyone, the exercise's warm-up (the
    entry point runs it before it forks the student's zygote), and the job, readable by root only
    (the entry point reads it; it holds the grade's seed, which the student's user must not read)."""
    files = {SCRIPT_NAME: job.source,
             "job.json": json.dumps(job.to_harness(f"/work/{SCRIPT_NAME}")).encode(),
             "warmup.json": json.dumps(job.warm_ups).encode()}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o400 if name == "job.json" else 0o444, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class WarmDocker(WarmSandbox):
    """The server as a container from the grader image, locked down as the Docker backend's are."""
    backend = "docker"
    contained = True

    def __init__(self, prepare: Sequence[dict] = (), image: str | None = None):
        super().__init__(prepare)
        self.cold = DockerSandbox(image)
        self.container: Any = None  # the server's docker Container, once opened

    def _open(self):
        from docker.utils.socket import frames_iter
        client = self.cold.client()
        # Tied to this process's life: the engine closes the server's stdin when this attachment
        # ends (StdinOnce, which docker-py sets for a container that is not detached), so should
        # this process die, the server reads the end of its input, exits, and goes (auto_remove).
        # Without it the engine keeps stdin open and the container outlives its worker for good.
        self.container = client.containers.create(
            self.cold.image, name=f"grade-warm-{os.urandom(6).hex()}", labels=labels("warm"),
            entrypoint=["python3", "-P", "-m", "sandbox.warm_server", "--image", *self._prepare_args()], stdin_open=True, init=True,
            auto_remove=True, **{**container_options(), "detach": False})
        try:
            self.socket = client.api.attach_socket(self.container.id,
                                                   params={"stdin": 1, "stdout": 1, "stream": 1})
            self.container.start()
        except Exception:
            self.container.remove(force=True)
            raise
        return (data for _stream, data in frames_iter(self.socket, tty=False))

    def _write(self, data: bytes) -> None:
        self.socket._sock.sendall(data)

    def _stop(self) -> None:
        try:
            self.socket.close()
        except Exception:
            pass
        try:
            self.container.remove(force=True)
        except Exception:  # already gone, or the engine went away: nothing left to remove here
            pass
