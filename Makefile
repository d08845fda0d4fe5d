# Two commands (see README): `make run` runs the default study end to end,
# `make test` runs the tests. Both create .venv and install dse on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
STUDY ?= studies/qwen3-8b-decode-chip.yaml

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test,postgres]' || \
	  { echo "make: the PostgreSQL driver (psycopg2-binary) could not be installed; the PostgreSQL tests will be skipped"; \
	    $(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'; }
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/dse run $(STUDY)

# (the package's bytecode first: where PYTHONDONTWRITEBYTECODE is set, as in CI's sandbox, every `dse` process a
# test starts compiled dse's ~110 modules from source again, ~0.3 s each; compileall skips what is up to date,
# and a failure of its own is no reason to skip the tests)
test: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 dse objectives constraints >/dev/null 2>&1 || true
	$(BIN)/python -m pytest -n 2 --dist worksteal

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_evaluate.py
	$(BIN)/python benchmarks/bench_search.py

clean:
	rm -rf $(VENV) results .pytest_cache
