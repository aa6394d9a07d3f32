# The two commands of the README: `make serve` (the service on its embedded defaults) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/.installed

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -p no:cacheprovider

serve: $(BIN)/.installed
	$(BIN)/tilec serve

.PHONY: install test serve
