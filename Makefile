# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned for development and CI: 2.13.0 installs the CPU wheel on disk.
TORCH := torch==2.13.0

.PHONY: venv test demo lint bench clean docs

$(BIN)/.installed: pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev,report,bench]" $(TORCH)
	touch $@

venv: $(BIN)/.installed

test: venv
	$(BIN)/ruff check jointgraph tests benchmarks
	$(BIN)/python -m pytest -n 2 tests

demo: venv
	$(BIN)/jointgraph bench gpt --layers 2 --batch 4 --seq 128 --repeat 5 --report demo-report.html

# The static documentation site (API reference from the docstrings + user guide) in build/docs.
docs: venv
	$(BIN)/pip install -q -e ".[docs]" $(TORCH)
	$(BIN)/python docs/build.py build/docs

lint: venv
	$(BIN)/ruff check jointgraph tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
