# maiden's build. Two targets matter to a newcomer:
#   make demo   build maiden and the example tools, then call one
#   make test   everything CI runs (.ci/run calls this), after installing
#               what the tests need (scripts/deps)
SHELL        := /bin/bash
.SHELLFLAGS  := -o pipefail -c
GO      ?= go
GOFLAGS ?=
export GOFLAGS

.PHONY: all build demo deps test vet lint bench dist clean

all: build

build:
	$(GO) build -o bin/maiden ./cmd/maiden

demo: build
	./scripts/demo

# -trimpath (as scripts/test and testkit.Binary build): without it every
# package vet and staticcheck compile for their export data is keyed by its
# directory, so a fresh clone or another worktree compiled them all again (a
# fresh clone's lint: ~110 CPU-seconds, 70 of them compiling); the messages
# name the same files.
vet:
	GOFLAGS="-trimpath $$GOFLAGS" $(GO) vet ./...

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	GOFLAGS="-trimpath $$GOFLAGS" $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd bench/compare && export GOFLAGS="-trimpath $$GOFLAGS" && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The programs the tests run (zsh, fish, sqlite3, curl, chromium,
# PostgreSQL...): installed with apt-get when missing and root, else named.
deps:
	GO=$(GO) scripts/deps

# Results must come from this run, not the test cache (scripts/test uses
# -count=1); bench/compare's smoke test keeps the comparison from rotting.
# lint runs beside the tests, not before them: most of a test binary's time
# is spent waiting (for child processes, servers, deadlines), and lint's two
# minutes of CPU fill it. Its output follows the tests' summary; either
# failing fails make test.
#
# A run that failed ends with the digest of what failed
# (scripts/testsummary's MAIDEN_TEST_FAILURES), after lint's output.
test: deps
	@log=$$(mktemp); failed=$$(mktemp); \
	$(MAKE) --no-print-directory lint >"$$log" 2>&1 & lint=$$!; \
	MAIDEN_TEST_FAILURES=$$failed GO=$(GO) scripts/test; status=$$?; \
	if wait $$lint; then echo "== make lint: ok"; else status=1; echo "== make lint: FAILED"; fi; \
	cat "$$log"; \
	if [ -s "$$failed" ]; then echo "== $$(head -n 1 "$$failed")"; tail -n +2 "$$failed"; fi; \
	rm -f "$$log" "$$failed"; exit $$status

bench:
	./bench/run

# Release archives for linux/amd64 and linux/arm64 and their SHA256SUMS in
# dist/ (cross-compiling cgo needs gcc-aarch64-linux-gnu). VERSION=v1.2.3
# stamps the binaries; otherwise they report the checkout's commit.
dist:
	GO=$(GO) VERSION=$(VERSION) scripts/dist

clean:
	rm -rf bin dist
