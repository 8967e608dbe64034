# The two commands a new user needs: `make run` starts the workbench, `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# The suite's processes (pytest-xdist), each with its own data dir, Redis, worker and server; 0: one process.
TEST_PROCESSES ?= 2

.PHONY: run test install install-test lint migrate

$(PY):
	bin/make-venv $(PYTHON) $(VENV)

$(VENV)/.installed: requirements.txt | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -r requirements.txt
	touch $@

$(VENV)/.installed-test: requirements-test.txt $(VENV)/.installed
	$(PY) -m pip install -r requirements-test.txt
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: $(VENV)/.installed
	$(PY) manage.py runworkbench --host $(HOST) --port $(PORT)

lint: $(VENV)/.installed-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	WORKBENCH_DATA_DIR=$$(mktemp -d) $(PY) manage.py check
	WORKBENCH_DATA_DIR=$$(mktemp -d) $(PY) manage.py makemigrations --check --dry-run

test: $(VENV)/.installed-test
	bin/ensure-chromium
	bin/ensure-slurm
	bin/ensure-slapd
	$(MAKE) lint
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)
