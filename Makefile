# slowstart: two commands.
#   make demo   installs what the build needs, builds ./slowstart and runs the demo (as root)
#   make test   installs what the suite needs, then lint and the whole suite (as root)
# Other targets: build, setup (the suite's Debian packages and tools), lint, web, web-check, fuzz, clean.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
STATICCHECK_VERSION := v0.8.2

# go.mod names the toolchain (a "toolchain" line): Go 1.21 or later fetches it from the
# module proxy by itself when GOTOOLCHAIN allows, which these targets make sure of
# unless you set GOTOOLCHAIN yourself.
export GOTOOLCHAIN ?= auto
GO_MIN_MINOR := 21

GOBIN = $(shell $(GO) env GOPATH)/bin

.PHONY: all demo build go-check setup setup-check test lint web web-check fuzz clean

all: build

# The demo: a server an ocean away emulated on this machine, probed with IW 3, 10 and 32.
demo: build
	@if [ "$$(id -u)" != 0 ]; then echo "make demo: the demo emulates a far-away server in network namespaces, which needs root: run sudo make demo" >&2; exit 1; fi
	./slowstart probe

build: go-check
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o slowstart ./cmd/slowstart
	@./slowstart --version

# Go 1.21 or later is needed to fetch the toolchain go.mod names; older ones (Debian
# bookworm's golang-go is 1.19) can't, and nothing here can install a newer one for you.
go-check:
	@command -v $(GO) >/dev/null 2>&1 || { \
		echo "make: Go is not installed. Install Go 1.21 or later from https://go.dev/dl/ (for example:" >&2; \
		echo "  curl -LO https://go.dev/dl/go1.26.8.linux-amd64.tar.gz && sudo tar -C /usr/local -xzf go1.26.8.linux-amd64.tar.gz" >&2; \
		echo "  export PATH=/usr/local/go/bin:\$$PATH), then run make again: Go fetches the toolchain slowstart pins (go.mod) itself." >&2; \
		exit 1; }
	@v=$$(cd / && GOTOOLCHAIN=local $(GO) env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'); \
	if [ -z "$$v" ] || [ "$$v" -lt $(GO_MIN_MINOR) ]; then \
		echo "make: $$(cd / && GOTOOLCHAIN=local $(GO) version 2>/dev/null || echo 'this Go') is too old: Go 1.21 or later is needed to fetch the toolchain go.mod names (Debian bookworm's golang-go is 1.19)." >&2; \
		echo "  Install Go from https://go.dev/dl/ (curl -LO https://go.dev/dl/go1.26.8.linux-amd64.tar.gz && sudo tar -C /usr/local -xzf go1.26.8.linux-amd64.tar.gz)," >&2; \
		echo "  put /usr/local/go/bin first in PATH, and run make again." >&2; \
		exit 1; fi

# Debian packages the tests drive for real (servers, clients) and the benchmarks use (peers, tools).
DEB_PACKAGES := tcpdump tshark tcptrace nginx-light caddy curl openssl iproute2 iputils-ping util-linux chromium ethtool apache2-utils iperf3 jq time
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
	$(MAKE) --no-print-directory fuzz

# Every fuzz target (func FuzzX in a _test.go file) fuzzed for FUZZTIME each, one after
# the other. A short run catches what a change broke on the way in; a longer one, by
# hand, searches further (docs/security.md): make fuzz FUZZTIME=10m. A failing input is
# written under the package's testdata/fuzz/FuzzX/, where the seed corpus run keeps it.
FUZZTIME ?= 3s
fuzz: go-check
	@set -e; for pkg in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$pkg/*_test.go); do \
			echo "fuzz ./$$pkg $$target for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./$$pkg; \
		done; \
	done

setup-check: go-check
	@command -v tcpdump >/dev/null && command -v chromium >/dev/null && test -x $(GOBIN)/staticcheck && test -d web/node_modules || $(MAKE) setup

lint: go-check
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...

clean:
	rm -f slowstart
