# Two commands on a fresh machine: `make run` (the API on http://127.0.0.1:3000) and `make test`.
# Both create .venv and install the pinned dependencies when missing or when the pins change.

# Python 3.13, as the functions run it: python3.13 from PATH, else pyenv's 3.13 when pyenv has one that is not
# the active version.
PYTHON ?= $(shell for p in python3.13 "$$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13; do \
	"$$p" -c 'import sys; assert sys.version_info[:2] == (3, 13)' >/dev/null 2>&1 && { echo "$$p"; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The client SDK (clients/python) is tested in an environment of its own: its extras (google-adk, LangGraph)
# need versions the development tools cannot share (aws-sam-cli pins watchdog 4, google-adk 2 needs 6).
CLIENT_VENV := .venv-client
CLIENT_STAMP := $(CLIENT_VENV)/.installed
CLIENT_SOURCES := $(shell find clients/python/src -name '*.py' -o -name py.typed 2>/dev/null)
export SAM_CLI_TELEMETRY := 0
export AWS_DEFAULT_REGION ?= us-east-1
# make run BACKEND=moto: DynamoDB and S3 on moto instead of the embedded SQLite backend; DATA_DIR: where the
# embedded backend keeps its data (make wipe deletes it).
BACKEND ?= embedded
DATA_DIR ?= .data
# make run AUTH=jwt: bearer tokens required, checked as API Gateway's JWT authorizer would, with a signing key kept
# under $(DATA_DIR)/auth; mint one with `.venv/bin/python -m local.token --user alice`. AUTH=iam: no token (today).
AUTH ?= iam
# make example-adk / example-langgraph / example-python: the API the examples talk to.
URL ?= http://127.0.0.1:3000

.PHONY: run wipe test check example-adk example-langgraph example-python client-test client-lock unit lint template openapi build smoke bench lock clean docs

$(STAMP): requirements-dev.txt layers/shared/requirements.txt
	@test -n "$(PYTHON)" || { echo "make: Python 3.13 is needed (python3.13 on PATH, or PYTHON=/path/to/python3.13)"; exit 1; }
	$(BIN)/python -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

# The package is installed as a user would (not editable): its tests import the source tree, and
# clients/python/tests/test_install.py runs the README example against the installed copy.
$(CLIENT_STAMP): clients/python/requirements-test.txt clients/python/pyproject.toml $(CLIENT_SOURCES)
	@test -n "$(PYTHON)" || { echo "make: Python 3.13 is needed (python3.13 on PATH, or PYTHON=/path/to/python3.13)"; exit 1; }
	$(CLIENT_VENV)/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null || { rm -rf $(CLIENT_VENV) && $(PYTHON) -m venv $(CLIENT_VENV); }
	$(CLIENT_VENV)/bin/python -m pip install --quiet --upgrade "pip>=24"
	$(CLIENT_VENV)/bin/python -m pip install --quiet -r clients/python/requirements-test.txt
	$(CLIENT_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall ./clients/python
	touch $(CLIENT_STAMP)

run: $(STAMP)
	$(BIN)/python -m local.server --backend $(BACKEND) --data-dir $(DATA_DIR) --auth $(AUTH)

wipe:  # delete everything make run stored, the local signing key with it (refused while a server holds DATA_DIR)
	@test ! -e $(DATA_DIR)/.lock || python3 -c 'import fcntl, sys; fcntl.flock(open(sys.argv[1], "a"), fcntl.LOCK_EX | fcntl.LOCK_NB)' $(DATA_DIR)/.lock 2>/dev/null \
		|| { echo "make wipe: a server is using $(DATA_DIR) ($$(cat $(DATA_DIR)/.lock)): stop it first"; exit 1; }
	rm -rf $(DATA_DIR)

test: $(STAMP) $(CLIENT_STAMP) lint template
	$(BIN)/python -m pytest
	cd clients/python && ../../$(CLIENT_VENV)/bin/python -m pytest

client-test: $(STAMP) $(CLIENT_STAMP)  # only the client's tests (against make run, started by the tests)
	cd clients/python && ../../$(CLIENT_VENV)/bin/python -m pytest

# The fast tier for the edit loop (under 2 minutes on two cores): lint, the unit tests and the contract suites on
# the embedded and in-memory stores (the DynamoDB and S3 adapters' runs are left to make test), on both cores.
check: $(STAMP) lint
	$(BIN)/python -m pytest tests/unit tests/contract -k "not dynamodb and not s3" -n 2

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

template: $(STAMP)
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sam validate --lint --template template.yaml

openapi: $(STAMP)  # regenerate docs/openapi.json from the route table (tests/unit/test_openapi.py checks it is current)
	PYTHONPATH=layers/shared $(BIN)/python -m agent_memory.edge.openapi docs/openapi.json

build: $(STAMP)  # sam finds python3.13 on PATH: the project's venv has it
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/sam build

smoke: $(STAMP)  # the README's quick start against API_URL: SigV4-signed for an execute-api URL, else unsigned
	@test -n "$(API_URL)" || { echo "usage: make smoke API_URL=<the stack's ApiUrl output, or http://127.0.0.1:3000>"; exit 2; }
	$(BIN)/python -m local.smoke --url "$(API_URL)"

example-adk: $(CLIENT_STAMP)  # the ADK example agent against URL (default make run's), with the client's environment
	$(CLIENT_VENV)/bin/python clients/python/examples/adk_agent.py --url $(URL)

example-langgraph: $(CLIENT_STAMP)  # the LangGraph example graph against URL
	$(CLIENT_VENV)/bin/python clients/python/examples/langgraph_agent.py --url $(URL)

example-python: $(CLIENT_STAMP)  # the plain-Python example against URL: it prints what each step answered
	$(CLIENT_VENV)/bin/python clients/python/examples/plain_python.py --url $(URL)

bench: $(STAMP)  # the quick ones; bench/README.md lists every benchmark
	$(BIN)/python -m bench.perf.requests
	$(BIN)/python -m bench.perf.context
	$(BIN)/python -m bench.perf.cold_start

docs: $(STAMP)  # the documentation site (mkdocs.yml, docs/) into build/site; warnings fail it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

lock: $(STAMP)
	$(BIN)/python -m pip install --quiet -r requirements-dev.in
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^pip==' > requirements-dev.txt

client-lock: $(CLIENT_STAMP)
	$(CLIENT_VENV)/bin/python -m pip install --quiet -r clients/python/requirements-test.in
	$(CLIENT_VENV)/bin/python -m pip freeze --exclude-editable | grep -v -e '^pip==' -e '^agent-memory-client' > clients/python/requirements-test.txt

clean:
	rm -rf $(VENV) $(CLIENT_VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache
