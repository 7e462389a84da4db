# slowstart: two commands.
#   make demo   installs what the demo needs, builds ./slowstart and runs the demo (as root)
#   make test   installs what the suite needs, then lint and the whole suite (as root)
# Other targets: build, setup (the suite's Debian packages and tools), lint, web, web-check,
# fuzz, go-toolchain (fetch the pinned Go), clean.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
STATICCHECK_VERSION := v0.8.2

# go.mod names the toolchain (a "toolchain" line): Go 1.21 or later fetches it from the
# module proxy by itself when GOTOOLCHAIN allows, which these targets make sure of
# unless you set GOTOOLCHAIN yourself.
export GOTOOLCHAIN ?= auto
GO_MIN_MINOR := 21

# When no Go 1.21 or later is installed (Debian bookworm's golang-go is 1.19), the
# toolchain go.mod pins is fetched from the Go module proxy as the module
# golang.org/toolchain (the zip `go` itself downloads for a toolchain line), checked
# against the SHA-256 below (computed once from the proxy's zip: sum.golang.org, which
# `go` would ask, need not be reachable) and unpacked into .toolchain/ of this checkout.
# GOPROXY's first URL is used when set, else proxy.golang.org.
comma := ,
GO_TOOLCHAIN_VERSION := 1.26.8
GO_TOOLCHAIN_MODULE  := golang.org/toolchain@v0.0.1-go$(GO_TOOLCHAIN_VERSION).linux-amd64
GO_TOOLCHAIN_SHA256  := 30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
GO_TOOLCHAIN_PROXY   := $(or $(filter http://% https://%,$(firstword $(subst $(comma), ,$(subst |, ,$(GOPROXY))))),https://proxy.golang.org)
GO_TOOLCHAIN_URL     := $(GO_TOOLCHAIN_PROXY)/golang.org/toolchain/@v/v0.0.1-go$(GO_TOOLCHAIN_VERSION).linux-amd64.zip
GO_TOOLCHAIN_DIR     := $(CURDIR)/.toolchain/$(GO_TOOLCHAIN_MODULE)

# GO is the Go that builds: the one in PATH when it is 1.21 or later, else the pinned
# toolchain in .toolchain/ (fetched by go-check when missing). Set GO to choose another.
ifeq ($(origin GO),undefined)
GO := $(shell if v=$$(cd / && GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p') && [ -n "$$v" ] && [ "$$v" -ge $(GO_MIN_MINOR) ]; then echo go; else echo $(GO_TOOLCHAIN_DIR)/bin/go; fi)
endif

GOBIN = $(shell $(GO) env GOPATH)/bin

.PHONY: all demo demo-setup build go-check go-toolchain setup setup-check test race lint web web-check fuzz clean clean-toolchain

all: build

# The demo: a server an ocean away emulated on this machine, probed with IW 3, 10 and 32,
# then a whole page loaded from each in headless Chromium (installed here when missing).
demo: demo-setup build
	./slowstart probe

# What the demo needs beyond the build: root (network namespaces) and Chromium for its
# page loads; iproute2 and ca-certificates come with it on a fresh Debian.
DEMO_PACKAGES := chromium iproute2 ca-certificates
demo-setup:
	@if [ "$$(id -u)" != 0 ]; then echo "make demo: the demo emulates a far-away server in network namespaces, which needs root: run sudo make demo" >&2; exit 1; fi
	@command -v chromium >/dev/null 2>&1 || { \
		echo "make demo: installing Chromium for the demo's page loads (apt-get install $(DEMO_PACKAGES))"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEMO_PACKAGES) || { \
		echo "make demo: Chromium could not be installed (apt-get install chromium failed): the demo's page-load half needs it" >&2; exit 1; }; }

build: go-check
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o slowstart ./cmd/slowstart
	@./slowstart --version

# Go 1.21 or later is needed to fetch the toolchain go.mod names. Without one, the pinned
# toolchain is fetched into .toolchain/ (go-toolchain); a GO given that is too old is refused.
go-check:
	@if [ "$(GO)" = "$(GO_TOOLCHAIN_DIR)/bin/go" ] && [ ! -x "$(GO)" ]; then $(MAKE) --no-print-directory go-toolchain; fi
	@v=$$(cd / && GOTOOLCHAIN=local $(GO) env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'); \
	if [ -z "$$v" ] || [ "$$v" -lt $(GO_MIN_MINOR) ]; then \
		echo "make: $$(cd / && GOTOOLCHAIN=local $(GO) version 2>/dev/null || echo '$(GO)') is too old or missing: Go 1.21 or later is needed (Debian bookworm's golang-go is 1.19)." >&2; \
		echo "  Run make without GO= to use the toolchain it fetches into .toolchain/, or install Go from https://go.dev/dl/." >&2; \
		exit 1; fi

# The pinned toolchain from the Go module proxy: downloaded, checked against
# GO_TOOLCHAIN_SHA256, unpacked into .toolchain/. Needs curl and unzip (installed with
# apt when missing and run as root).
go-toolchain:
	@case "$$(uname -m)" in x86_64|amd64) ;; *) echo "make: no Go 1.$(GO_MIN_MINOR) or later is installed, and the toolchain fetched here is for linux-amd64 only: install Go from https://go.dev/dl/" >&2; exit 1;; esac
	@command -v curl >/dev/null 2>&1 || { echo "make: curl is needed to fetch the Go toolchain: apt-get install curl" >&2; exit 1; }
	@command -v unzip >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then echo "make: installing unzip to unpack the Go toolchain"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends unzip; \
		else echo "make: unzip is needed to unpack the Go toolchain: sudo apt-get install unzip" >&2; exit 1; fi; }
	@echo "make: no Go 1.$(GO_MIN_MINOR) or later found: fetching Go $(GO_TOOLCHAIN_VERSION) from $(GO_TOOLCHAIN_URL) into .toolchain/"
	@rm -rf .toolchain/tmp && mkdir -p .toolchain/tmp
	@curl -fsSL --retry 3 -o .toolchain/tmp/go.zip "$(GO_TOOLCHAIN_URL)" || { \
		echo "make: downloading the Go toolchain from $(GO_TOOLCHAIN_URL) failed: check the network (or GOPROXY), or install Go 1.$(GO_MIN_MINOR) or later" >&2; rm -rf .toolchain/tmp; exit 1; }
	@echo "$(GO_TOOLCHAIN_SHA256)  .toolchain/tmp/go.zip" | sha256sum -c --status - || { \
		echo "make: the downloaded toolchain's SHA-256 is $$(sha256sum .toolchain/tmp/go.zip | cut -d' ' -f1), not the $(GO_TOOLCHAIN_SHA256) this Makefile pins: not used (a proxy serving another file, or a damaged download)" >&2; \
		rm -rf .toolchain/tmp; exit 1; }
	@unzip -q .toolchain/tmp/go.zip -d .toolchain/tmp/unpacked
	@chmod +x .toolchain/tmp/unpacked/$(GO_TOOLCHAIN_MODULE)/bin/* .toolchain/tmp/unpacked/$(GO_TOOLCHAIN_MODULE)/pkg/tool/*/* 2>/dev/null || true
	@rm -rf "$(GO_TOOLCHAIN_DIR)" && mkdir -p "$$(dirname "$(GO_TOOLCHAIN_DIR)")" && mv .toolchain/tmp/unpacked/$(GO_TOOLCHAIN_MODULE) "$(GO_TOOLCHAIN_DIR)"
	@rm -rf .toolchain/tmp
	@"$(GO_TOOLCHAIN_DIR)/bin/go" version

# Debian packages the tests drive for real (servers, clients) and the benchmarks use (peers,
# tools); gcc for the race detector (make race).
DEB_PACKAGES := tcpdump tshark tcptrace nginx-light caddy curl openssl iproute2 iputils-ping util-linux chromium ethtool apache2-utils iperf3 jq time gcc libc6-dev
setup: go-check
	@if [ "$$(id -u)" != 0 ]; then echo "make setup installs Debian packages: run it as root (sudo make setup)" >&2; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES)
	$(GO) mod download
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@command -v npm >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm || { \
		echo "make setup: npm (Node.js) is needed for the web UI's tests and could not be installed: install Node.js 18 or later with npm, then run make test again" >&2; exit 1; }
	cd web && npm ci --no-audit --no-fund

# The web UI: type-check and bundle web/src into web/dist (embedded in the binary;
# the built bundle is committed so that a plain `go build` needs no Node.js).
web:
	cd web && npm ci --no-audit --no-fund && npm run build

# The web UI's check: type-check web/src and fail when the committed web/dist is not
# what the sources build (rebuilt into a temporary directory and compared; a second or so).
web-check:
	cd web && npm run --silent check

# The whole suite: vet, lint, the web UI's check, unit and integration tests (real kernel
# TCP in network namespaces when run as root), the fuzz targets' seed corpora, and then
# every fuzz target for a few seconds of fuzzing each (make fuzz).
test: setup-check lint web-check
	$(GO) test -count=1 -p 1 -timeout 30m ./...
	$(MAKE) --no-print-directory race
	$(MAKE) --no-print-directory fuzz

# The packages whose goroutines share data (the live path's reader and watcher,
# the stream's shards and merger, the packet ring and the live capture, field's
# kernel and packet sources, the collector's tuner) run once more under the
# race detector (about a minute).
RACE_PKGS := ./live ./analysis/stream ./capture ./field ./internal/gctune
race: go-check
	$(GO) test -race -count=1 -p 1 -timeout 15m $(RACE_PKGS)

# Every fuzz target (func FuzzX in a _test.go file) fuzzed for FUZZTIME each, one after
# the other. A short run catches what a change broke on the way in; a longer one, by
# hand, searches further (docs/security.md): make fuzz FUZZTIME=10m. A failing input is
# written under the package's testdata/fuzz/FuzzX/, where the seed corpus run keeps it.
# Go before 1.27 can end a fuzz run that found nothing with "context deadline exceeded"
# when FUZZTIME runs out while a worker is busy (go.dev/issue/75804; seen here on a busy
# machine): such a run, with no failing input written, is run once more.
FUZZTIME ?= 3s
fuzz: go-check
	@set -e; fuzz() { $(GO) test -run '^$$' -fuzz "^$$2\$$" -fuzztime $(FUZZTIME) ./$$1; }; \
	for pkg in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$pkg/*_test.go); do \
			echo "fuzz ./$$pkg $$target for $(FUZZTIME)"; \
			log=$$(mktemp); \
			if ! fuzz $$pkg $$target >$$log 2>&1; then \
				cat $$log; \
				if grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
					echo "fuzz ./$$pkg $$target: the fuzzing engine's deadline race (no failing input), once more"; \
					fuzz $$pkg $$target || { rm -f $$log; exit 1; }; \
				else rm -f $$log; exit 1; fi; \
			else cat $$log; fi; \
			rm -f $$log; \
		done; \
	done

setup-check: go-check
	@command -v tcpdump >/dev/null && command -v chromium >/dev/null && command -v gcc >/dev/null && test -x $(GOBIN)/staticcheck && test -d web/node_modules || $(MAKE) setup

lint: go-check
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...

clean:
	rm -f slowstart

# The fetched toolchain (make go-toolchain fetches it again).
clean-toolchain:
	rm -rf .toolchain
