# maiden's build. Two targets matter to a newcomer:
#   make demo   build maiden and the example tools, then call one
#   make test   everything CI runs (.ci/run calls this)
SHELL        := /bin/bash
.SHELLFLAGS  := -o pipefail -c
GO      ?= go
GOFLAGS ?=
export GOFLAGS

FLAGS_FILE := internal/wasmtime/zz_cgo_flags.go

.PHONY: all setup build demo test vet lint bench clean

all: build

# cgo needs the absolute path of the wasmtime-go module in this machine's
# module cache; genflags writes it to a git-ignored file.
setup: $(FLAGS_FILE)
$(FLAGS_FILE): go.mod go.sum internal/wasmtime/genflags/main.go
	cd internal/wasmtime && $(GO) run ./genflags

build: setup
	$(GO) build -o bin/maiden ./cmd/maiden

demo: build
	./scripts/demo

vet: setup
	$(GO) vet ./...

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd bench/compare && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Results must come from this run, not the test cache (scripts/test uses
# -count=1); bench/compare's smoke test keeps the comparison from rotting.
test: lint
	GO=$(GO) scripts/test

bench: setup
	./bench/run

clean:
	rm -rf bin $(FLAGS_FILE)
