# Everything a fresh machine with Python 3.11+ needs: `make demo`, `make test`, `make bench`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Dependencies once (keyed by pyproject.toml); graphfix itself on every run, so the
# installed copy (transforms mapped into graphfix.transforms) matches the tree.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet ".[test]"
	touch $(STAMP)

install: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --force-reinstall .

demo: install
	$(BIN)/graphfix demo

test: install
	cd tests && ../$(BIN)/python -m pytest -q -p no:cacheprovider

bench: install
	$(BIN)/python fixtures/bench/run_bench.py

clean:
	rm -rf $(VENV) build dist
