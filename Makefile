# hourglass: build, run and test entry points. CI runs `make test` (see .ci/run).

GO        ?= go
BIN       ?= bin/hourglass
DATA_DIR  ?= ./hourglass-data
BENCH_OUT ?= bench.txt
# RACE is the race-detector flag of `make test`; it needs cgo and a C
# compiler. `make test RACE=` runs without it.
RACE      ?= -race

# What `hourglass version`, /healthz and hourglass_build_info report, stamped
# by the linker (see internal/buildinfo). Outside a git checkout they fall
# back to "devel" and "unknown". `make release VERSION=v1.2.3` names a release.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
BUILDINFO  := github.com/hourglass-mq/hourglass/internal/buildinfo
LDFLAGS    := -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT) -X $(BUILDINFO).Date=$(BUILD_DATE)

# release: the platforms `make release` builds, GOOS/GOARCH.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
DIST      ?= dist

# bash for pipefail: `make bench` must fail when a benchmark fails even
# though its output goes through tee.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: all build release run test test-examples compat-java compat-java-remoting compat-spring-remoting vet fmt-check fmt bench soak mutate mutate-check schemathesis clean bench-rocketmq bench-rocketmq-remoting

all: build

## build: compile the hourglass binary into $(BIN), stamped with the version from git
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hourglass

## release: static, stamped binaries for $(PLATFORMS) in $(DIST)/ with SHA256SUMS; checks that the one for this machine runs `version`
release:
	rm -rf $(DIST) && mkdir -p $(DIST)
	set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/hourglass-$(VERSION)-$$os-$$arch; \
		echo "build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $$out ./cmd/hourglass; \
	done
	cd $(DIST) && sha256sum hourglass-* > SHA256SUMS
	@self=$(DIST)/hourglass-$(VERSION)-$$($(GO) env GOOS)-$$($(GO) env GOARCH); \
	if [ -x "$$self" ]; then \
		out=$$("$$self" version) && echo "$$out" && echo "$$out" | grep -qx 'hourglass *$(VERSION)'; \
	else echo "no release binary for this machine: not run"; fi

## run: build, then run the broker on $(DATA_DIR) with the default settings (127.0.0.1:7070)
run: build
	./$(BIN) serve --data-dir $(DATA_DIR)

## test: go vet, the gofmt check, the mutants' check (mutate-check), and every test with the race detector; the engine's crash and power-loss explorations at a smaller size (-short, which each says in its log; test-durability runs them in full)
test: vet fmt-check mutate-check
	@# -short shrinks only the durability explorations listed in
	@# DURABILITY_TESTS (engine/short_test.go holds that); every other test
	@# runs as it does without it. -p 4: many packages' tests spend most of
	@# their time waiting (for due times, long polls, fsync), so four
	@# packages at a time keep 2 cores busy: 93 s against 138 s with the
	@# default of one package per core (warm build cache, idle machine).
	$(GO) test $(RACE) -short -count=1 -p 4 -timeout 25m ./...
	@# The official RocketMQ push consumer races inside itself, so its test
	@# is built without the race detector (rocketmq/push_test.go).
	$(GO) test -count=1 -run Push ./rocketmq
	@# So does the official RocketMQ 4.x Go client (remoting/client_test.go).
	$(GO) test -count=1 -run Client ./remoting

# DURABILITY_TESTS: the tests (engine, commitlog) whose size -short reduces.
DURABILITY_TESTS := ^(TestPowerLoss|TestCrashKill9|TestTornTail|TestDedupMemoryPerKey)$$

## test-durability: the engine's and the commit log's crash and power-loss explorations at full size (engine: 30 power-loss runs, 10,000+ crash states; 50 kill -9 cycles; 150 torn tails; the dedup memory bound; commitlog: 10,000+ crash states), with the race detector; CI runs it after test
.PHONY: test-durability
test-durability:
	$(GO) test $(RACE) -count=1 -timeout 40m -v -run '$(DURABILITY_TESTS)' ./engine ./commitlog

## test-examples: the examples' tests (their own Go modules) against a real PostgreSQL started by scripts/postgres.sh
test-examples:
	@url="$$(scripts/postgres.sh start)" && trap '$(CURDIR)/scripts/postgres.sh stop' EXIT && \
	cd examples/order-timeout && $(GO) vet ./... && \
	HOURGLASS_PG_URL="$$url" HOURGLASS_PG_REQUIRED=1 $(GO) test -count=1 ./...

## compat-java: the official RocketMQ 5 Java client against the real binary, over TLS and plaintext (needs Java and Maven)
compat-java:
	scripts/compat-java.sh

## compat-java-remoting: the official RocketMQ remoting Java client (4.9.x and 5.x) against the real binary's remoting listener; CASES= picks cases, COMPAT_REMOTING_TARGET=rocketmq runs them against Apache RocketMQ 5.3.3 (needs Java and Maven)
compat-java-remoting:
	scripts/compat-java-remoting.sh $(CASES)

## compat-spring-remoting: rocketmq-spring-boot-starter (a tiny Spring Boot app: RocketMQTemplate at a delay level, a listener) against the real binary's remoting listener (needs Java and Maven)
compat-spring-remoting:
	scripts/compat-spring-remoting.sh

vet:
	$(GO) vet ./...

fmt-check:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt would change these files (run make fmt):"; echo "$$files"; exit 1; fi

## fmt: rewrite every Go file in gofmt style
fmt:
	gofmt -w .

## bench: run every benchmark once, output to $(BENCH_OUT) (compare runs with benchstat)
bench:
	$(GO) test -run xxx -bench . -benchmem -timeout 60m ./... 2>&1 | tee $(BENCH_OUT)

## bench-rocketmq: hourglass against RocketMQ 5.3.3 (Maven jars, scripts/rocketmq.sh) through the official Go client, 3 runs (about 20 min, ~1.6 GiB; needs Java 17 and Maven; not part of test)
bench-rocketmq:
	scripts/bench-rocketmq.sh $(RMQBENCH_OUT)

## bench-rocketmq-remoting: hourglass's remoting listener against RocketMQ 5.3.3's name server and broker through the official remoting Java client 4.9.8, delay levels at push consumers, 3 runs (about 16 min, ~1.6 GiB; needs Java 17 and Maven; not part of test)
bench-rocketmq-remoting:
	scripts/bench-rocketmq-remoting.sh $(RMQBENCH_OUT)

## soak: 1000 kill-and-recover cycles of the engine's crash test (up to 2 hours)
soak:
	HOURGLASS_CRASH_CYCLES=1000 $(GO) test -run TestCrash -count=1 -timeout 2h ./engine/

## mutate: plant known bugs one at a time (scripts/mutate.sh) and check that the tests catch each; fails on a mutant that survives, no longer applies or does not build (several minutes; not part of test)
mutate:
	./scripts/mutate.sh

## mutate-check: every mutant of make mutate still applies (its anchor found exactly once) and its package builds, no tests run (seconds; part of test, so CI fails when a mutant goes stale)
mutate-check:
	./scripts/mutate.sh --self-test
	./scripts/mutate.sh --check

## schemathesis: property-based test of the HTTP API against docs/openapi.yaml on the real binary (about 2 min; installs Schemathesis into a venv under the cache dir)
schemathesis:
	./scripts/schemathesis.sh

## test-kafka: the Kafka mode end-to-end tests on a real Kafka (scripts/kafka.sh fetches it once into the cache dir and starts it; needs java and mvn), then schemathesis against a worker's HTTP API and docs/openapi-kafka.yaml (40 s); Kafka is stopped even when a test fails
.PHONY: test-kafka
test-kafka:
	@export KAFKA_STATE=$${TMPDIR:-/tmp}/hourglass-kafka-test.$$$$.state; \
	addr=$$(KAFKA_PORT=$${KAFKA_PORT:-0} ./scripts/kafka.sh start) || exit 1; \
	trap './scripts/kafka.sh stop' EXIT; \
	echo "Kafka at $$addr"; \
	HOURGLASS_KAFKA=$$addr HOURGLASS_KAFKA_REQUIRED=1 HOURGLASS_KAFKA_RESTART="$(CURDIR)/scripts/kafka.sh restart" $(GO) test $(RACE) -count=1 -timeout 10m ./kafkamode/... && \
	SCHEMATHESIS_KAFKA=$$addr SCHEMATHESIS_MAX_TIME=$${SCHEMATHESIS_KAFKA_MAX_TIME:-40} ./scripts/schemathesis.sh

## verify-unit: systemd-analyze verify on deploy/hourglass.service (also run by make test, in e2e)
.PHONY: verify-unit
verify-unit:
	$(GO) test -count=1 -run TestSystemdUnitVerifies ./e2e

## clean: remove build, release and benchmark outputs (never the data directory)
clean:
	rm -rf bin $(DIST) $(BENCH_OUT)

## soak-kafka: Kafka mode soak on a three-node Kafka cluster (RF 3, min ISR 2): three workers, a few minutes of load, one Kafka node and one worker killed mid-run; fails unless 0 lost, 0 duplicated, 0 early (about 5 min; not in CI)
.PHONY: soak-kafka
soak-kafka:
	./scripts/soak-kafka.sh

## bench-nats: issue 8's herd (20,000 due at one instant, 8 consumers) against hourglass serve and NATS JetStream 2.15.2 scheduling (benchmarks/natsherd, its own module), 3 alternating runs each, summary with median, range and ratios (about 5 min; not part of test)
.PHONY: bench-nats
bench-nats:
	scripts/bench-nats.sh $(NATSBENCH_OUT)

## bench-net: issue 31's network paths against the engine in process, in one run (internal/netbench): HTTP one message a request, the send stream, batches, RocketMQ 5 gRPC sends, and receive+ack by request, stream and SimpleConsumer, and those against the bare transports (httpfloor, h2cfloor, grpcfloor, ackfloor); 3 runs, median, range and ratios (about 8 min; not part of test)
.PHONY: bench-net
bench-net:
	$(GO) run ./internal/netbench -runs 3

## test-natsherd: go vet and the unit tests of benchmarks/natsherd (its own module; a cold build compiles nats-server, minutes on 2 cores, so it is not part of test)
.PHONY: test-natsherd
test-natsherd:
	cd benchmarks/natsherd && $(GO) vet ./... && $(GO) test -count=1 ./...
