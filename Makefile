# slowstart: build, test and lint. `make setup` installs what the build and the tests
# need (Debian packages, Go tools); `make test` runs the whole suite.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
STATICCHECK_VERSION := v0.8.2
GOBIN   := $(shell $(GO) env GOPATH)/bin

.PHONY: all build setup setup-check test lint web clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o slowstart ./cmd/slowstart

# Debian packages the tests drive for real (servers, clients) and the benchmarks use (peers, tools).
DEB_PACKAGES := tcpdump tshark tcptrace nginx-light curl openssl iproute2 iputils-ping util-linux chromium ethtool apache2-utils iperf3 jq time
setup:
	@if [ "$$(id -u)" != 0 ]; then echo "make setup installs Debian packages: run it as root" >&2; exit 1; fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES)
	$(GO) mod download
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	cd web && npm ci --no-audit --no-fund

# The web UI: type-check and bundle web/src into web/dist (embedded in the binary;
# the built bundle is committed so that a plain `go build` needs no Node.js).
web:
	cd web && npm ci --no-audit --no-fund && npm run build

# The whole suite: vet, lint, unit and integration tests (real kernel TCP in network
# namespaces when run as root), and the fuzz targets' seed corpora.
test: setup-check lint
	$(GO) test -count=1 -p 1 -timeout 30m ./...

setup-check:
	@command -v tcpdump >/dev/null && command -v chromium >/dev/null && test -x $(GOBIN)/staticcheck && test -d web/node_modules || $(MAKE) setup

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...

clean:
	rm -f slowstart
