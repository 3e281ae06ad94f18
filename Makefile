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
run: ## build and start the local stack (gateway, admin API, embedded Redis and store) on 127.0.0.1:8080
	$(GO) build -o $(BUILD)/sluice ./cmd/sluice
	exec $(BUILD)/sluice local $(ARGS)

.PHONY: run-global
run-global: ## start three local Regions over one dynalite ledger (installs it with scripts/dynalite.sh): a global quota holds across them
	$(GO) build -o $(BUILD)/sluice ./cmd/sluice
	SLUICE_DYNALITE="$$(scripts/dynalite.sh)" PATH="$(NODE):$$PATH" exec $(BUILD)/sluice local --regions 3 $(ARGS)

# NODE is a directory holding Node.js 22 or later (scripts/node.sh installs
# one from the npm registry when the machine's is older): the CDK CLI and
# the CDK tests' jsii runtime run on it.
NODE = $(shell scripts/node.sh)

.PHONY: check
check: ## the quick tier: vet, every test with -short, -race only where concurrency is tested (private Redis and PostgreSQL)
	PATH="$(NODE):$$PATH" scripts/testenv.sh scripts/check.sh

.PHONY: test
test: ## install/start Redis and PostgreSQL, then lint (gofmt, vet, staticcheck) and run every test with -race: the CI gate
	PATH="$(NODE):$$PATH" scripts/testenv.sh scripts/test.sh

.PHONY: bench
bench: ## run the benchmarks against a private Redis and PostgreSQL
	scripts/testenv.sh $(GO) test -run '^$$' -bench . -benchmem $(BENCHFLAGS) ./...

.PHONY: soak
soak: ## sluice load against sluice local on a private Redis and PostgreSQL for SOAK_DURATION (10m): RSS, goroutines, over-admission; not part of test
	scripts/testenv.sh scripts/soak.sh

.PHONY: chaos
chaos: ## the fault harness (root): every fault of docs/RELIABILITY.md under load on network namespaces, then the table; SCENARIOS=kill,split picks; not part of test
	$(GO) build -o $(BUILD)/sluice-chaos ./internal/chaos/cmd/chaos
	scripts/testenv.sh $(BUILD)/sluice-chaos $(if $(SCENARIOS),-scenarios $(SCENARIOS)) $(ARGS)

.PHONY: check-global
check-global: ## the conservation checker of global budgets, long: CHECK_RUNS runs (default 200) of CHECK_STEPS steps (60) on a private Redis and dynalite
	CHECK_RUNS=$${CHECK_RUNS:-200} scripts/testenv.sh $(GO) test -count=1 -run '^TestConservation$$' -timeout 60m ./internal/limiter/

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 60s), one at a time; not part of test
	scripts/fuzz.sh

.PHONY: openapi
openapi: ## regenerate what comes from internal/admin/openapi.yaml: the TypeScript client's types, docs/admin-api.md's route table
	scripts/clients.sh generate

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (make test runs it first)
	GO=$(GO) scripts/lint.sh

.PHONY: build
build: $(FUNCTIONS:%=build-%) ## build every Lambda as bootstrap for linux/arm64 (deploy) and the host arch (tests)

.PHONY: build-arm64
build-arm64: $(FUNCTIONS:%=build-arm64-%) ## build every Lambda for linux/arm64 only: what synth and deploy upload

build-arm64-%:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(GOFLAGS_LAMBDA) -o $(BUILD)/arm64/$*/bootstrap ./functions/$*

build-%: build-arm64-% ## build one Lambda: build/{arm64,host}/<name>/bootstrap
	CGO_ENABLED=0 GOOS=linux GOARCH=$(HOSTARCH) $(GO) build $(GOFLAGS_LAMBDA) -o $(BUILD)/host/$*/bootstrap ./functions/$*

.PHONY: clean
clean: ## remove build output
	rm -rf $(BUILD) cdk.out

# --- CDK (infra/). The CLI is pinned in package.json and installed into
# node_modules by `npm ci` when missing. Pass extra CLI flags with ARGS,
# e.g. make deploy ARGS='-c serverlessRedis=true'. (Not CDKFLAGS: the CLI
# reads every CDK* environment variable as an option.)
CDK       = PATH="$(NODE):$$PATH" npx --no-install cdk
CDKLOCAL  = PATH="$(NODE):$$PATH" npx --no-install cdklocal
LOCALSTACK_REDIS_URL    ?= redis://host.docker.internal:6379
LOCALSTACK_DATABASE_URL ?= postgres://sluice:sluice@host.docker.internal:5432/sluice?sslmode=disable
# LocalStack accepts any credentials; a real profile's are kept if set.
LOCALSTACK_ENV := AWS_ACCESS_KEY_ID=$${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=$${AWS_SECRET_ACCESS_KEY:-test} \
	AWS_REGION=$${AWS_REGION:-us-east-1} AWS_DEFAULT_REGION=$${AWS_REGION:-us-east-1}
LOCALSTACK_CTX := -c localstack=true -c 'redisUrl=$(LOCALSTACK_REDIS_URL)' -c 'databaseUrl=$(LOCALSTACK_DATABASE_URL)'

node_modules: package.json package-lock.json
	PATH="$(NODE):$$PATH" npm ci --no-audit --no-fund
	@touch node_modules

.PHONY: synth
synth: build-arm64 node_modules ## synthesize the CloudFormation template into cdk.out/ (builds the linux/arm64 Lambdas first)
	$(CDK) synth $(ARGS)

.PHONY: diff
diff: build-arm64 node_modules ## compare the stack with what is deployed in the current AWS account
	$(CDK) diff $(ARGS)

.PHONY: rds-ca
rds-ca: ## fetch the Amazon RDS CA bundle the binaries embed (a published version only; needs internet)
	scripts/rds-ca.sh

.PHONY: deploy
deploy: rds-ca build-arm64 node_modules ## fetch the RDS CA bundle, build the linux/arm64 Lambdas and deploy the stack to the current AWS account (cdk deploy)
	$(CDK) deploy $(ARGS)

.PHONY: localstack-deploy
localstack-deploy: build-arm64 node_modules ## deploy to a running LocalStack with cdklocal, using LOCALSTACK_REDIS_URL and LOCALSTACK_DATABASE_URL
	$(LOCALSTACK_ENV) $(CDKLOCAL) bootstrap $(LOCALSTACK_CTX) $(ARGS)
	$(LOCALSTACK_ENV) $(CDKLOCAL) deploy --require-approval never $(LOCALSTACK_CTX) $(ARGS)
