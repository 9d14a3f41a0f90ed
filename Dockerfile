# stalewatch's container image.
#
# Two stages: the builder makes a wheel of stalewatch and installs it with its dependencies
# into a venv at /opt/stalewatch; the final stage is the same slim Python with only that venv
# copied in, so no build backend, wheel cache or source tree ships, and no pip.
#
# At run time the image writes nothing: the venv was byte-compiled when pip installed it and
# PYTHONDONTWRITEBYTECODE stops Python from trying again, so the pod can run with
# readOnlyRootFilesystem. It runs as the numeric user 65532, so runAsNonRoot can verify it
# without a passwd entry.
#
# Its dependencies are installed from requirements.lock, every one pinned with the hashes of its
# published files (pip --require-hashes), so two builds of one commit get the same packages;
# `make lock` pins them again from pyproject.toml.
#
# The base is pinned by its full version tag. Pin its digest as well when you build
# (python:3.11.14-slim-bookworm@sha256:...); it could not be looked up where this file was
# written. tests/deploy/test_image.py runs the builder's install steps below and starts the
# result as user 65532 on a read-only root file system.

FROM python:3.11.14-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY watcher/ watcher/
RUN python -m pip wheel --no-deps --wheel-dir /wheels .
RUN python -m venv --without-pip /opt/stalewatch
RUN python -m pip --python /opt/stalewatch/bin/python install --require-hashes --no-deps -r requirements.lock
RUN python -m pip --python /opt/stalewatch/bin/python install --no-deps /wheels/stalewatch-*.whl

FROM python:3.11.14-slim-bookworm
ENV PATH=/opt/stalewatch/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The base ships pip and setuptools for installing things; nothing is installed at run time.
RUN /usr/local/bin/python -m pip uninstall --yes pip setuptools wheel
COPY --from=builder /opt/stalewatch /opt/stalewatch
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["stalewatch"]
CMD ["run"]
