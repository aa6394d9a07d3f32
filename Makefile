# The two commands of the README: `make serve` (the service on its embedded defaults) and `make test`.
# Both use .venv. Each set of extras has its own stamp: `make serve` installs only the server extra
# (no CUDA wheels, no Celery), `make test` the test extra (which includes it); a stamp is redone when
# pyproject.toml changes, so a second run installs nothing and either order works.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP)-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# the test extra holds the server extra: after `make test`, `make serve` has nothing to install
$(STAMP)-server: pyproject.toml | $(BIN)/python
	if [ ! $(STAMP)-test -nt pyproject.toml ]; then $(BIN)/pip install -q -e '.[server]'; fi
	touch $@

install: $(STAMP)-test

test: $(STAMP)-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -p no:cacheprovider -n 2 --dist loadfile

serve: $(STAMP)-server
	$(BIN)/tilec serve

.PHONY: install test serve
