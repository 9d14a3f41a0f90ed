# Two commands matter (see README): `make demo` and `make test`.
.PHONY: demo test lab install lint lock chart

demo:
	@bash scripts/install.sh runtime
	@# analyze exits 1 when it finds a critical root cause, which is the point of this demo.
	@.venv/bin/stalewatch analyze examples/tofu-controller-down --now 2026-11-30T12:00:00Z; rc=$$?; \
	  echo "(stalewatch exit code $$rc: 0 healthy, 1 critical root cause found, 2 bad input)"; [ $$rc -le 1 ]

test:
	bash scripts/test.sh

# Real Flux controllers against a real API server, one thing broken, stalewatch serving its page
# until Ctrl-C (tests/lab/README.md). The first run builds the controllers (several minutes).
lab:
	@bash scripts/install.sh all
	@.venv/bin/python -m tests.lab $(ARGS)

install:
	bash scripts/install.sh all

# The Helm chart as a package in dist/ (docs/operations.md: push it with `helm push dist/stalewatch-*.tgz oci://...`).
# Regenerates nothing: `python charts/generate.py --check` (run by the tests) says when to.
chart:
	@helm=$$(bash scripts/chart-tools.sh | tail -n 2 | head -n 1) && \
	  $$helm lint charts/stalewatch && $$helm package charts/stalewatch -d dist/

lint:
	.venv/bin/ruff check watcher tests bench dashboards alerts charts && .venv/bin/ruff format --check . && .venv/bin/mypy watcher && .venv/bin/lint-imports

# The image's runtime dependencies, pinned with hashes (the Dockerfile installs exactly these).
lock:
	@bash scripts/install.sh runtime
	.venv/bin/pip install -q pip-tools
	.venv/bin/pip-compile -q --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links \
	  --output-file requirements.lock pyproject.toml
