# The two commands a new user needs: `make site` and `make test`.
# Everything is installed from pinned lock files (requirements.lock, package-lock.json).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.atlas-installed
CHROMIUM := /usr/bin/chromium
TEST_JOBS ?= auto
# This machine kind keeps torch's CPU wheel on disk; pip takes it from there instead of a CUDA build.
LOCAL_WHEELS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels)

.PHONY: site test env browser serve bench bench-site clean

site: $(STAMP)
	$(PY) build.py
	@echo "Open site/index.html in a browser, or run: $(PY) build.py --serve"

# The tests run in one process per core (pytest-xdist); the tests of one file stay in one process.
test: $(STAMP) browser
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile

env: $(STAMP)

# The stamp is rebuilt when a lock file changes; an existing .venv is reused.
$(STAMP): requirements.lock package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(LOCAL_WHEELS) -r requirements.lock
	npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

# Browser tests drive Debian's Chromium (Playwright cannot download its own browser here).
browser:
	@test -x $(CHROMIUM) || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

serve: $(STAMP)
	$(PY) build.py --serve

bench: $(STAMP)
	$(PY) benchmarks/build_time.py

bench-site: $(STAMP) browser
	$(PY) benchmarks/page_weight.py

clean:
	rm -rf site .pytest_cache .atlas-cache
