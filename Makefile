# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

# Compares the bf16 convolution from the user report across every default path, then explains
# each divergence (where, why, the verified fix). Exit status 1 means "a path differs from the
# baseline", which is what this case shows; only 2 (an error) fails the demo.
demo: $(STAMP)
	@$(BIN)/jaxparity explain examples/conv_bf16.py --html demo-report.html; rc=$$?; \
	if [ $$rc -gt 1 ]; then exit $$rc; fi; echo "(report also written to demo-report.html)"

# The HTML report is tested in a real browser: Debian's Chromium, driven by Playwright.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

test: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m pytest tests

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_compare.py

clean:
	rm -rf $(VENV) build src/*.egg-info
