# The sandbox image: Python, the pinned CPU PyTorch, pytest, pytest-json-report, the harness and the
# exercises. Build it with scripts/build-images, which fills ./wheelhouse first so that this build
# needs no network. With a registry, any official Python 3.11 image serves as the base.
ARG BASE=python:3.11-slim
FROM ${BASE}

# The harness runs as `grader`; the student's code runs under a uid the entry point draws for each
# container (sandbox/container.py), which no file of the image belongs to. The student cannot read
# the exercises (tests, reference) nor reach the harness's report, which leaves through a pipe.
RUN useradd --system --no-create-home --shell /usr/sbin/nologin --uid 990 grader

COPY wheelhouse /tmp/wheelhouse
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet --no-index --find-links /tmp/wheelhouse --disable-pip-version-check attention-grader \
 && rm -rf /tmp/wheelhouse \
 && site=$(/opt/venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
 && chown -R grader:grader "$site/exercise" && chmod -R go-rwx "$site/exercise" \
 && mkdir /work && chmod 0755 /work \
 && echo "grade with: grade platform prairielearn, or the Docker backend" > /etc/attention-grader-image \
 && printf '#!/bin/sh\n# PrairieLearn external grader entry point: grades /grade/student into /grade/results/results.json\nexec grade platform prairielearn "$@"\n' > /usr/local/bin/grade-prairielearn \
 && chmod 0755 /usr/local/bin/grade-prairielearn

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /work
# Runs as root with only CAP_SETUID and CAP_SETGID (see sandbox/docker.py); it starts the zygote as
# the student's uid and the harness as `grader`, then relays the harness's report to stdout.
ENTRYPOINT ["python3", "-P", "-m", "sandbox.container"]
