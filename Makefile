# Everything a fresh machine with Python 3.11+ needs: `make demo`, `make test`, `make bench`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# graphfix installs editable with its dependencies, once (keyed by pyproject.toml): an edit
# in graphfix/ or transforms/ is live without a reinstall.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# Bytecode written now, as pip writes it for a regular install, so that no run compiles
# graphfix's modules from source (where PYTHONDONTWRITEBYTECODE is set, every run would).
install: $(STAMP)
	$(BIN)/python -m compileall -q graphfix transforms > /dev/null

demo: install
	$(BIN)/graphfix demo

# One test process per core (a test file stays in one process: its module fixtures, such as
# the real graphs a BACKGROUND_SCRIPT builds, are built once).
test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile

bench: install
	$(BIN)/python fixtures/bench/run_bench.py

clean:
	rm -rf $(VENV) build dist
