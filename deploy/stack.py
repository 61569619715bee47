"""The grader as a course runs it on one machine, started with plain Docker (the Docker SDK), no
Compose needed: Redis, PostgreSQL, WORKERS `grade worker`s grading in the Docker sandbox, and
`grade serve` in front of them on 127.0.0.1:PORT.

    .venv/bin/python deploy/stack.py up [--workers 2] [--port 8000] [--state deploy/state]
    .venv/bin/grade token new NAME --tokens deploy/state/tokens.json   # a platform's token, taken at once
    .venv/bin/python deploy/stack.py status             # each container, and /healthz
    .venv/bin/python deploy/stack.py down [--volumes]   # stop and remove it (--volumes: the data too)

Images: the grader's (scripts/build-images) and grader-services:bookworm, Debian's redis-server and
postgresql (scripts/build-images services: debootstrap, no registry). The state folder (mode 0700)
holds what the stack's parts share and nobody else reads: the queue's secret, Redis's and
PostgreSQL's passwords, the API's tokens file. Redis and PostgreSQL sit on an internal network with
no route out and no published port; the service is on it and on a second network for its one
published port; the workers reach the host's engine through its socket, to start each grade's
locked-down container (which has no network at all). Every container, network and volume carries
the label attention-grader.stack=NAME, and `down` removes exactly those.
"""
from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

import click
import httpx

ROOT = Path(__file__).resolve().parent.parent
LABEL = "attention-grader.stack"
SERVICES_IMAGE = os.environ.get("GRADER_SERVICES_IMAGE", "grader-services:bookworm")
GRADER_IMAGE = os.environ.get("GRADER_IMAGE", "attention-grader:latest")
DOCKER_SOCKET = "/var/run/docker.sock"
REDIS_CONF = ROOT / "deploy" / "redis.conf"


def _docker():
    """The engine's client, once it answers and both images are there (the grader's checked as
    the Docker sandbox checks it); else one line that says what to run."""
    import docker

    from sandbox.docker import DockerSandbox
    from sandbox.backend import SandboxUnavailable
    try:
        client = DockerSandbox(GRADER_IMAGE).client()
        client.images.get(SERVICES_IMAGE)
    except SandboxUnavailable as err:
        raise click.ClickException(str(err)) from err
    except docker.errors.ImageNotFound as err:
        raise click.ClickException(f"the image {SERVICES_IMAGE} is missing: build it with "
                                   "scripts/build-images services") from err
    return client


def _secret(state: Path, name: str, make) -> str:
    path = state / name
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(make())
    return path.read_text().strip()


def _labels(stack: str, role: str) -> dict:
    return {LABEL: stack, f"{LABEL}.role": role}


def _wait(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise click.ClickException(f"{what} did not come up within {timeout:g} s (deploy/stack.py status)")
        time.sleep(1)


@click.group()
@click.option("--name", "stack", default="attention-grader", show_default=True,
              help="The stack's name: its containers, networks and volumes are NAME-*.")
@click.option("--state", type=click.Path(path_type=Path, file_okay=False), default=ROOT / "deploy" / "state",
              show_default=True, help="The folder of the stack's secrets and tokens file.")
@click.pass_context
def main(ctx, stack: str, state: Path):
    """Run the grader's service, queue, database and workers with plain Docker."""
    ctx.obj = {"stack": stack, "state": state}


@main.command()
@click.option("--workers", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option("--slots", type=click.IntRange(1, 16), default=1, show_default=True, help="Warm slots per worker.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True,
              help="The service's port on 127.0.0.1 (put a TLS proxy in front for the internet).")
@click.pass_obj
def up(obj, workers: int, slots: int, port: int):
    """Start the stack (or what of it is missing) and wait until /healthz says it can grade."""
    import docker
    client = _docker()
    stack, state = obj["stack"], obj["state"]
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)
    redis_password = _secret(state, "redis.password", lambda: secrets.token_hex(24))
    pg_password = _secret(state, "postgres.password", lambda: secrets.token_hex(24))
    _secret(state, "queue.secret", lambda: secrets.token_hex(32))
    tokens = state / "tokens.json"
    if not tokens.exists():
        from grader.service import tokens as tokenfile
        tokenfile.empty(tokens)  # `grade token new` adds to it while the service runs

    def network(name: str, internal: bool):
        found = client.networks.list(names=[name])
        return found[0] if found else client.networks.create(name, internal=internal, labels=_labels(stack, "network"))
    inner, outer = network(f"{stack}-internal", True), network(f"{stack}-public", False)
    for volume in ("redis", "postgres"):
        if not client.volumes.list(filters={"name": f"{stack}-{volume}"}):
            client.volumes.create(f"{stack}-{volume}", labels=_labels(stack, "volume"))

    def run(role: str, image: str, command, *, user: str | None = None, environment=None, volumes=None,
            ports=None, networks=(inner,), entrypoint=None):
        name = f"{stack}-{role}"
        try:
            existing = client.containers.get(name)
            if existing.status != "running":
                existing.start()
            return existing
        except docker.errors.NotFound:
            pass
        container = client.containers.create(
            image, command, name=name, hostname=role, user=user, entrypoint=entrypoint,
            environment=environment or {}, volumes=volumes or {}, ports=ports or {},
            labels=_labels(stack, role), restart_policy={"Name": "unless-stopped"},
            network=networks[0].name, stop_signal="SIGTERM")
        for extra in networks[1:]:
            extra.connect(container)
        container.start()
        return container

    ro = {"mode": "ro"}
    run("redis", SERVICES_IMAGE, ["redis-server", "/etc/redis/grader.conf", "--bind", "0.0.0.0",
                                  "--protected-mode", "yes", "--requirepass", redis_password,
                                  "--dir", "/var/lib/redis"],
        # a new volume takes its mount point's owner from the image: Debian's packages own these
        user="redis", volumes={f"{stack}-redis": {"bind": "/var/lib/redis", "mode": "rw"},
                               str(REDIS_CONF): {"bind": "/etc/redis/grader.conf", **ro}})
    data = "/var/lib/postgresql/grader"
    pg_start = ("set -e; export PATH=$(ls -d /usr/lib/postgresql/*/bin | tail -1):$PATH; "
                f"if [ ! -s {data}/PG_VERSION ]; then "
                f"printf '%s' \"$PGPASSWORD\" > /tmp/pw; initdb -D {data} -U grader -E UTF8 --locale=C --pwfile=/tmp/pw -A scram-sha-256 "
                f">/dev/null; rm /tmp/pw; echo 'host all all 0.0.0.0/0 scram-sha-256' >> {data}/pg_hba.conf; fi; "
                f"unset PGPASSWORD; exec postgres -D {data} -c listen_addresses='*' -k /tmp")
    run("postgres", SERVICES_IMAGE, ["sh", "-c", pg_start], user="postgres",
        environment={"PGPASSWORD": pg_password},
        volumes={f"{stack}-postgres": {"bind": "/var/lib/postgresql", "mode": "rw"}})
    broker = f"redis://:{redis_password}@redis:6379/0"
    shared = {str(state): {"bind": "/state", "mode": "ro"}}
    for n in range(1, workers + 1):
        run(f"worker{n}", GRADER_IMAGE, ["--slots", str(slots), "--sandbox", "docker", "--name", f"worker{n}@{stack}"],
            entrypoint=["grade", "worker"],
            environment={"GRADER_BROKER": broker, "GRADER_QUEUE_SECRET_FILE": "/state/queue.secret",
                         "GRADER_IMAGE": GRADER_IMAGE},
            volumes={**shared, DOCKER_SOCKET: {"bind": DOCKER_SOCKET, "mode": "rw"}})
    database = f"postgresql+psycopg://grader:{pg_password}@postgres:5432/postgres"
    run("service", GRADER_IMAGE, ["--host", "0.0.0.0", "--port", "8000", "--queue", broker,
                                  "--tokens", "/state/tokens.json", "--secret-file", "/state/queue.secret"],
        entrypoint=["grade", "serve"], environment={"GRADER_DATABASE_URL": database},
        volumes=shared, ports={"8000/tcp": ("127.0.0.1", port)}, networks=(outer, inner))

    def healthy() -> bool:
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        except httpx.HTTPError:
            return False
        return answer.status_code == 200 and answer.json().get("warm_slots", 0) >= workers * slots
    _wait("the stack", healthy, 600)
    click.echo(f"{stack} is up: http://127.0.0.1:{port} · {workers} worker(s) of {slots} slot(s) · "
               f"make a token with: grade token new NAME --tokens {tokens}", err=True)


@main.command()
@click.pass_obj
def status(obj):
    """Each container of the stack and its state."""
    client = _docker()
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={obj['stack']}"}):
        click.echo(f"{container.name}\t{container.status}")


@main.command()
@click.option("--volumes", is_flag=True, help="Remove the data too (Redis's queue and results, the database).")
@click.pass_obj
def down(obj, volumes: bool):
    """Stop and remove the stack's containers and networks (and, with --volumes, its data), and the
    grading containers its workers left."""
    client = _docker()
    label = {"label": f"{LABEL}={obj['stack']}"}
    for container in client.containers.list(all=True, filters=label):
        container.remove(force=True)
    for n in range(1, 17):  # the warm grading containers a worker of this stack left behind
        for container in client.containers.list(all=True, filters={"label": f"attention-grader.worker=worker{n}@{obj['stack']}"}):
            container.remove(force=True)
    for network in client.networks.list(filters=label):
        network.remove()
    if volumes:
        for volume in client.volumes.list(filters=label):
            volume.remove(force=True)
    click.echo(f"{obj['stack']} is down{' and its data removed' if volumes else ''}", err=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
