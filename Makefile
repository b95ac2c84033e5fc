# Every target sets up what it needs: `make test` on a fresh clone creates .venv and installs the project.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint demo bench fuzz fixtures clean system-deps

# The install compiles the sidecar's protobuf codec (C) and the modules setup.py lists (mypyc, with the modules
# whose constants they take): a changed source reinstalls it, as the compiled module is the one Python imports.
COMPILED := $(shell sed -n 's/^ *"\(src\/trajgrade\/[a-z_/]*\.py\)",$$/\1/p' setup.py)
$(STAMP): pyproject.toml setup.py src/trajgrade/doors/sidecar/_protowire.c $(COMPILED)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q

# Debian packages the observability tests use (prometheus, chromium, libpython3.11): installed when missing and
# when root with apt; otherwise it prints what to install.
system-deps:
	bash scripts/system-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts examples
	$(BIN)/ruff format --check src tests benchmarks scripts examples
	$(BIN)/mypy
	$(BIN)/lint-imports

demo: $(STAMP)
	$(BIN)/python examples/demo_agent.py

bench: $(STAMP) system-deps
	$(BIN)/python benchmarks/run_all.py

# The sidecar's C reader built with AddressSanitizer and UBSan, fed mutations of every fixture for FUZZ_SECONDS;
# fails at the first sanitizer report.
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(BIN)/python scripts/fuzz_protowire.py --seconds $(FUZZ_SECONDS)

# Regenerate tests/fixtures with the real instrumentation libraries (one virtualenv per environment).
fixtures:
	bash tests/fixtures/regenerate.sh

clean:
	rm -rf $(VENV) .fixture-envs
