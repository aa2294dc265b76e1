# The only commands a newcomer needs: make run, make test, make eval, make bench.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BIND   ?= 127.0.0.1:8080
DEMO   := data/demo/gateway.toml
# The dependency set every install takes, exact versions with their hashes, written by `make lock`
# (docs/architecture.md, "The lock file"); pyproject.toml keeps the ranges a library user gets.
LOCK   := requirements.lock
# The lock tool, itself from PyPI, in a venv of its own: only `make lock` needs it.
UV_VERSION := 0.13.8
LOCK_TOOL  := .venv-lock

.PHONY: install run demo test coverage eval eval-milvus bench lint lock messages clean

# A changed lock or pyproject.toml rebuilds the venv from empty, so it holds exactly the lock's
# set: pip (pinned in the lock too) and the build backend included, nothing left from before.
# --no-deps: the lock is the whole closure, so nothing is resolved; a release published after the
# lock was written (a newer wheel of an extra's package) cannot change or break the install.
$(STAMP): $(LOCK) pyproject.toml
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check >/dev/null || { $(BIN)/python -m pip check; \
	    echo "$(LOCK) does not satisfy pyproject.toml: run make lock"; exit 1; }
	touch $(STAMP)

install: $(STAMP)

# Rewrites the lock from pyproject.toml (dependencies and the dev extra, plus pip and the build
# backend), one set for every platform and Python >= 3.11, keeping each pin already there that
# still fits. LOCK_ARGS=--upgrade takes the newest releases of everything,
# LOCK_ARGS="--upgrade-package redis" of one.
lock:
	test -x $(LOCK_TOOL)/bin/uv || { $(PYTHON) -m venv $(LOCK_TOOL) && \
	    $(LOCK_TOOL)/bin/python -m pip install -q uv==$(UV_VERSION); }
	printf 'pip\nsetuptools>=68\n' | $(LOCK_TOOL)/bin/uv pip compile --quiet pyproject.toml - \
	    --extra dev --universal --generate-hashes --custom-compile-command "make lock" \
	    --output-file $(LOCK) $(LOCK_ARGS)

# The console's catalogs (gateway/console/locale/*/LC_MESSAGES/messages.po, read at start): every
# msgid of babel.cfg's sources extracted, then each catalog updated (new msgids empty, gone ones
# dropped). No source lines are kept, so a moved string changes nothing. Translate the new
# zh_CN entries; tests/console/test_i18n.py fails on an empty one.
POT := $(VENV)/messages.pot

messages: install
	$(BIN)/pybabel -q extract -F babel.cfg --no-location --sort-output --project kbgate \
	    --copyright-holder "kbgate" -o $(POT) .
	$(BIN)/pybabel -q update -i $(POT) -d gateway/console/locale -D messages --init-missing \
	    --no-fuzzy-matching --ignore-obsolete --ignore-pot-creation-date -l zh_CN
	$(BIN)/pybabel -q update -i $(POT) -d gateway/console/locale -D messages --init-missing \
	    --no-fuzzy-matching --ignore-obsolete --ignore-pot-creation-date -l en

# The runnable demo config: deploy/demo/gateway.toml plus a demo agent client and the console's
# admin token; its secrets (signing key, Bearer token, ref key, admin token) are generated once in data/demo/.
$(DEMO): deploy/demo/gateway.toml deploy/demo/configure.py $(STAMP)
	$(BIN)/python deploy/demo/configure.py data/demo >/dev/null

# No --delete-missing: documents added from the console (or the document API) stay across runs.
demo: install $(DEMO)
	$(BIN)/kbgate index add --config $(DEMO) --index demo-docs --no-progress deploy/demo/docs

run: demo
	@echo ""
	@echo "kbgate demo: in another shell, send a signed request as the Volcengine console does:"
	@echo "  $(BIN)/kbgate probe http://$(BIND)/volcengine/demo --config $(DEMO) --tenant demo --first tech --second software --query '如何轮换密钥'"
	@echo "The demo agent client's Bearer token (data/demo/agent-token) serves Dify and MCP on route 'docs':"
	@echo "  Dify 'Add External Knowledge API': API Endpoint http://$(BIND)/dify  API Key $$(cat data/demo/agent-token)  (External Knowledge ID: docs)"
	@echo "  MCP client: {\"mcpServers\": {\"kbgate\": {\"url\": \"http://$(BIND)/mcp\", \"headers\": {\"Authorization\": \"Bearer $$(cat data/demo/agent-token)\"}}}}"
	@echo "  curl -s http://$(BIND)/dify/retrieval -H \"Authorization: Bearer $$(cat data/demo/agent-token)\" -H 'Content-Type: application/json' -d '{\"knowledge_id\":\"docs\",\"query\":\"如何轮换密钥\",\"retrieval_setting\":{\"top_k\":3,\"score_threshold\":0}}'"
	@echo ""
	@echo "The console: open http://$(BIND)/admin/ and log in with the admin token (kept in data/demo/admin-token):"
	@echo "  $$(cat data/demo/admin-token)"
	@echo "  more people, each with a role: $(BIN)/kbgate users add NAME --role viewer|owner|admin [--index demo-docs] --config $(DEMO)"
	@echo ""
	$(BIN)/kbgate serve --config $(DEMO) --bind $(BIND)

# The suite runs in TEST_WORKERS pytest-xdist processes, a test file per process (--dist loadfile:
# a file's module fixtures, servers and indexes are built once); most tests wait on real servers,
# so three processes fill two cores. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 3

test: install
	bash tests/ensure-tools.sh
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

eval: install
	$(BIN)/kbgate eval

# Each shared set on an index served by Milvus (a Milvus Lite server started for the run) against
# the same pages in Tantivy: MRR@10, answer-hit@5, wins and losses (docs/scaling.md, step 3).
eval-milvus: install
	$(BIN)/kbgate eval --milvus lite

bench: install
	bash bench/ensure-tools.sh
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: install
	$(BIN)/ruff check gateway indexes tests bench
	$(BIN)/python -m mypy --strict gateway indexes bench/costs.py bench/query_costs.py

# Branch coverage of the whole suite, the CLI and the real servers it starts included. The
# security- and protocol-critical modules must be covered completely; the figures of the
# whole packages are printed beside them.
COVERED_FULLY := gateway/volcengine/signing.py,gateway/volcengine/wire.py,gateway/core/replay.py,gateway/core/scope.py,gateway/core/refs.py

coverage: install
	bash tests/ensure-tools.sh
	$(BIN)/python -m coverage erase
	$(BIN)/python -m coverage run -m pytest -q -p no:cacheprovider
	$(BIN)/python -m coverage combine -q
	@echo "branch coverage, whole packages: gateway $$($(BIN)/python -m coverage report --format=total --include='gateway/*')%," \
	      "indexes $$($(BIN)/python -m coverage report --format=total --include='indexes/*')%," \
	      "both $$($(BIN)/python -m coverage report --format=total)%"
	@echo "must be 100%: signing/verify, the wire format, replay, scope, refs"
	$(BIN)/python -m coverage report --include='$(COVERED_FULLY)' --fail-under=100

clean:
	rm -rf data .eval bench-results test-artifacts .coverage
