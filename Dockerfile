# The slowstart binary in a container image, for surveys run across a cluster
# (deploy/k8s/, docs/scale.md). The binary is static (CGO_ENABLED=0: the SQLite
# driver is pure Go), so the image holds it, CA certificates (for the page
# loads' certificate checks) and nothing else.
#
#   docker build -t slowstart:dev .
#   docker run --rm --cap-drop ALL --cap-add NET_ADMIN --cap-add NET_RAW \
#       -v "$PWD/list:/list:ro" -v "$PWD/results:/results" slowstart:dev \
#       survey /list/sites.txt --store /results/sites.db
#
# What the survey needs at run time: CAP_NET_RAW (packet captures) and
# CAP_NET_ADMIN (the exact measurement's nftables table, in the container's own
# network namespace), nothing more; nf_tables in the node's kernel; a writable
# directory for the store. It runs as root inside the container (Linux grants
# added capabilities to a non-root process only through file capabilities,
# which image layers do not reliably keep), with every other capability dropped.

# --- build -------------------------------------------------------------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
# The toolchain go.mod names is fetched from the module proxy when newer.
ENV GOTOOLCHAIN=auto CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN go build -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/slowstart ./cmd/slowstart \
    && /out/slowstart --version

# --- run ---------------------------------------------------------------------
# distroless/static: CA certificates, /etc/passwd, tzdata; no shell, no package manager.
FROM gcr.io/distroless/static-debian12
COPY --from=build /out/slowstart /usr/local/bin/slowstart
USER 0:0
WORKDIR /results
ENTRYPOINT ["/usr/local/bin/slowstart"]
CMD ["--help"]
