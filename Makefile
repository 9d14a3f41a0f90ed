# Two commands matter (see README): `make demo` and `make test`.
.PHONY: demo test install lint

demo:
	@bash scripts/install.sh runtime
	@# analyze exits 1 when it finds a critical root cause, which is the point of this demo.
	@.venv/bin/stalewatch analyze examples/tofu-controller-down --now 2026-11-30T12:00:00Z; rc=$$?; \
	  echo "(stalewatch exit code $$rc: 0 healthy, 1 critical root cause found, 2 bad input)"; [ $$rc -le 1 ]

test:
	bash scripts/test.sh

install:
	bash scripts/install.sh all

lint:
	.venv/bin/ruff check watcher tests bench dashboards alerts && .venv/bin/mypy watcher && .venv/bin/lint-imports
