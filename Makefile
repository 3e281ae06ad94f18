# Sluice — run `make` for the list of targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO        ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
BUILD     := build
HOSTARCH  := $(shell $(GO) env GOARCH)
LDFLAGS   := -s -w
GOFLAGS_LAMBDA := -trimpath -tags lambda.norpc -ldflags '$(LDFLAGS)'

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_%-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## start the local stack (gateway, admin API, embedded Redis and store) on 127.0.0.1:8080
	$(GO) run ./cmd/sluice local $(ARGS)

.PHONY: test
test: ## install/start Redis and PostgreSQL, then vet and run every test with -race
	scripts/testenv.sh scripts/test.sh

.PHONY: bench
bench: ## run the benchmarks against a private Redis and PostgreSQL
	scripts/testenv.sh $(GO) test -run '^$$' -bench . -benchmem $(BENCHFLAGS) ./...

.PHONY: lint
lint: ## gofmt, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

.PHONY: build
build: $(FUNCTIONS:%=build-%) ## build every Lambda as bootstrap for linux/arm64 (deploy) and the host arch (tests)

build-%: ## build one Lambda: build/{arm64,host}/<name>/bootstrap
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(GOFLAGS_LAMBDA) -o $(BUILD)/arm64/$*/bootstrap ./functions/$*
	CGO_ENABLED=0 GOOS=linux GOARCH=$(HOSTARCH) $(GO) build $(GOFLAGS_LAMBDA) -o $(BUILD)/host/$*/bootstrap ./functions/$*

.PHONY: clean
clean: ## remove build output
	rm -rf $(BUILD) cdk.out
