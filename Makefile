# Set-up and checks. `make demo` and `make test` each create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-postgres test-realclients soak lint typecheck bench clean

# Each step says what it does before it starts: pip is quiet, and a first install takes about a minute.
$(STAMP): pyproject.toml
	@echo "creating $(VENV) (a Python environment for turnback, in this folder)"
	@$(PYTHON) -m venv $(VENV)
	@echo "upgrading pip in $(VENV)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "installing turnback and its extras into $(VENV) (about a minute)"
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)
	@echo "$(VENV) is ready: $(BIN)/turnback"

demo: $(STAMP)
	$(BIN)/turnback demo

lint: $(STAMP)
	@echo "checking the code's style (ruff) and the layers (import-linter)"
	@$(BIN)/ruff check src tests benchmarks
	@$(BIN)/ruff format --check src tests benchmarks
	@$(BIN)/lint-imports --no-cache --no-logo  # the layers of docs/architecture.md (contracts in pyproject.toml)

typecheck: $(STAMP)
	@echo "checking types (mypy --strict; slower the first time)"
	@$(BIN)/mypy

test: lint typecheck
	@echo "running the test suite (pytest, several minutes)"
	@$(BIN)/python -m pytest -n auto -q --ignore=tests/realclients

# The engine-level suites again, each test's store in PostgreSQL (a throwaway server the tests start), and the
# reliability suite's crash loops (kill -9 mid-undo, mid-revert, mid-rollback, mid-exec; then resume).
RELIABILITY_ON_POSTGRES := $(addprefix tests/reliability/,test_kill_undo.py test_kill_revert_rollback.py test_kill_exec.py)
test-postgres: $(STAMP)
	TURNBACK_TEST_BACKEND=postgresql $(BIN)/python -m pytest -n 2 -q -rs tests/ops tests/history $(RELIABILITY_ON_POSTGRES)

# The real Claude Code CLI (installed from npm into a cache outside the repo) against a fake model API.
test-realclients: $(STAMP)
	$(BIN)/python -m pytest -p no:xdist -q -rsxX tests/realclients

soak: $(STAMP)
	TURNBACK_SOAK=1 $(BIN)/python -m pytest -q tests/reliability

bench: $(STAMP)
	$(BIN)/python benchmarks/calls.py
	$(BIN)/python benchmarks/hooks.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
