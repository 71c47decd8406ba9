# Warden: a static binary on a distroless base, running as a non-root user.
# (docker build needs a Docker engine, which the project's build machines lack;
# the binary itself is built and tested by `make build` / `make test`, and
# deploy/deploy_test.go checks this file against deploy/config.)
#
#   V=$(git describe --tags --always --dirty)
#   docker build --build-arg VERSION=$V -t warden:$V .
#   docker run -v $PWD/tls:/etc/warden/tls:ro warden:$V          # the MACP sidecar (deploy/config/macp-sidecar.yaml)
#   docker run ... warden:$V serve --config mcp-sidecar.yaml     # relative to the WORKDIR, /etc/warden
#   docker run ... warden:$V serve --config a2a-sidecar.yaml
#   docker run ... warden:$V serve --config extauthz.yaml
# The image carries the example configurations and operator policies, never
# deploy/config's example TLS pair and handle keys: mount your own tls/ (and
# mcp.key, a2a.key) under /etc/warden, or your own /etc/warden altogether;
# `warden check --config FILE` validates it as serve would.
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /warden ./cmd/warden

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /warden /usr/local/bin/warden
# The example configurations, one per mode, and their operator policies; the
# MACP sidecar's is the default. Their relative paths resolve against the
# working directory.
COPY deploy/config/*.yaml deploy/config/*.rego /etc/warden/
COPY deploy/config/macp-sidecar.yaml /etc/warden/warden.yaml
WORKDIR /etc/warden
USER nonroot:nonroot
# MACP sidecar, MCP sidecar, A2A sidecar, ext_authz, admin (/healthz, /readyz, /metrics)
EXPOSE 50051 3001 8443 9191 9090
ENTRYPOINT ["/usr/local/bin/warden"]
CMD ["serve", "--config", "/etc/warden/warden.yaml"]
