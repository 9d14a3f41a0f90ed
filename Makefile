# Two commands matter (see README): `make demo` and `make test`.
.PHONY: demo test install lint

demo:
	@bash scripts/install.sh runtime
	.venv/bin/stalewatch analyze examples/tofu-controller-down --now 2026-11-30T12:00:00Z

test:
	bash scripts/test.sh

install:
	bash scripts/install.sh all

lint:
	.venv/bin/ruff check watcher tests && .venv/bin/mypy watcher && .venv/bin/lint-imports
