# The only commands a newcomer needs: make run, make test, make eval, make bench.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BIND   ?= 127.0.0.1:8080
DEMO   := deploy/demo/gateway.toml

.PHONY: install run demo test eval bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

data/demo/secret:
	mkdir -p data/demo
	$(BIN)/python -c "import secrets; print(secrets.token_urlsafe(32))" > $@
	chmod 600 $@

demo: install data/demo/secret
	$(BIN)/kbgate index add --config $(DEMO) --index demo-docs --delete-missing --no-progress deploy/demo/docs

run: demo
	@echo ""
	@echo "kbgate demo: in another shell, send a signed request as the Volcengine console does:"
	@echo "  $(BIN)/kbgate probe http://$(BIND)/volcengine/demo --config $(DEMO) --tenant demo --first tech --second software --query '如何轮换密钥'"
	@echo ""
	$(BIN)/kbgate serve --config $(DEMO) --bind $(BIND)

test: install
	bash tests/ensure-tools.sh
	$(BIN)/python -m pytest

eval: install
	$(BIN)/kbgate eval

bench: install
	bash bench/ensure-tools.sh
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: install
	$(BIN)/pip install -q ruff && $(BIN)/ruff check gateway indexes tests bench

clean:
	rm -rf data .eval bench-results test-artifacts
