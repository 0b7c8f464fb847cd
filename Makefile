# jail: build, test, benchmark, install.
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
PREFIX  ?= /usr/local
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/jail
INIT    := bin/jail-init
export GOTOOLCHAIN ?= auto
# Tests compile the seccomp filter with libseccomp (cgo) to check the one
# embedded in the binary; the binary itself is static and needs neither.
export CGO_ENABLED := 1

.PHONY: all build deps test-deps test unit e2e bench install demo clean generate

all: build

build: deps $(BIN) $(INIT)

$(BIN): $(shell find cmd jail proxy bpf profiles internal -name '*.go' -o -name '*.json' -o -name '*.o' -o -name '*.bpf' 2>/dev/null) go.mod go.sum
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/jail

# jail's init inside the jail, without the planner and the proxy: it starts
# faster than the jail binary re-executing itself.
$(INIT): $(shell find cmd/jail-init jail/linux/inside jail/linux/seccomp internal -name '*.go' -o -name '*.bpf' 2>/dev/null) go.mod go.sum
	CGO_ENABLED=0 $(GO) build -trimpath -o $(INIT) ./cmd/jail-init

deps:
	@tests/deps.sh

test-deps:
	@tests/deps.sh --test
	@tests/setup-user.sh

# The whole suite: vet, the other platform compiles (every package and its
# tests), unit tests, and the
# end-to-end tests of the built binary as root and as an unprivileged user.
# arm64: both binaries build as released (static, no cgo), vet passes, and
# the tests of the architecture-specific packages compile and link (-exec
# true runs none of them: this machine cannot).
test: test-deps
	$(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...
	for p in $$(GOOS=darwin CGO_ENABLED=0 $(GO) list ./...); do GOOS=darwin CGO_ENABLED=0 $(GO) test -c -o /dev/null $$p || exit 1; done
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/jail
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/jail-init
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) test -exec true ./jail/linux/seccomp ./jail/linux/inside ./bpf ./internal/sysnum
	$(GO) test -count=1 -timeout 15m ./...

unit: deps
	$(GO) test -count=1 ./jail/... ./cmd/...

e2e: test-deps
	$(GO) test -count=1 -v ./tests/

# Start-up against a bare bwrap (ratio), and HTTPS through interception
# against direct (added latency per keep-alive request, bulk throughput),
# requests with secret injection against plain interception, and 1,000
# execs with command rules (every exec checked) against without. The
# proxy's figures are medians of hundreds of interleaved pairs; the
# network rows (new connection, keep-alive, bulk HTTPS and HTTP, RSS
# under 64 streams) go through the built jail against curl on the host.
# A second jail --remote run that changes nothing is timed against plain
# ssh host true over loopback sshd.
bench: build test-deps
	$(GO) test -run '^$$' -bench Startup -benchtime 40x -count 3 ./tests/
	$(GO) test -run '^$$' -bench ExecWithRules -benchtime 5x -count 1 ./tests/
	$(GO) test -run '^$$' -bench Learning -benchtime 5x -count 1 ./tests/
	$(GO) test -run '^$$' -bench Dashboard -benchtime 20x -count 1 ./tests/
	$(GO) test -run '^$$' -bench 'Intercept|Inject' -benchtime 3x -count 2 ./proxy/
	$(GO) test -run '^$$' -bench 'Generate|Build' -count 3 ./darwin/
	JAIL_NET_BENCH=1 $(GO) test -count=1 -v -run '^TestNetBench$$' ./tests/
	JAIL_REMOTE_BENCH=1 $(GO) test -count=1 -v -run '^TestRemoteBench$$' ./tests/
	JAIL_SOAK_REQUESTS=100000 $(GO) test -count=1 -v -run '^TestProxySoak$$' ./tests/
	JAIL_AGENT_BENCH=1 $(GO) test -count=1 -v -timeout 30m -run '^TestAgentSessionsWallTime$$' ./tests/

# A real run: the jail around git and a look for your SSH keys.
demo: build
	@echo '$$ jail -- git status --short --branch'
	@./$(BIN) -- git status --short --branch
	@echo '$$ jail -c "ls -a ~; cat ~/.ssh/id_* 2>&1 | head -1"'
	@./$(BIN) -c 'ls -a ~; cat ~/.ssh/id_* 2>&1 | head -1'

# Rebuild the eBPF probes' generated Go and object files (committed, so a
# plain build needs no clang): needs clang, llvm and libbpf-dev.
generate:
	$(GO) generate ./bpf/

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/jail
	install -D -m 0755 $(INIT) $(DESTDIR)$(PREFIX)/bin/jail-init

clean:
	rm -rf bin
