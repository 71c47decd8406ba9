# Warden: a static binary on a distroless base, running as a non-root user.
# (docker build needs a Docker engine, which the project's build machines lack;
# the binary itself is built and tested by `make build` / `make test`, and
# deploy/deploy_test.go checks this file against deploy/config.)
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t warden .
#   docker run -v $PWD/tls:/etc/warden/tls:ro warden            # the MACP sidecar (deploy/config/macp-sidecar.yaml)
#   docker run ... warden serve --config /etc/warden/mcp-sidecar.yaml
#   docker run ... warden serve --config /etc/warden/extauthz.yaml
# Mount your own /etc/warden (configuration, operator policies, TLS files,
# MCP handle key) to replace the examples; `warden check --config FILE`
# validates it as serve would.
FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /warden ./cmd/warden

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /warden /usr/local/bin/warden
# The example configurations, one per mode; the MACP sidecar's is the default.
COPY deploy/config/ /etc/warden/
COPY deploy/config/macp-sidecar.yaml /etc/warden/warden.yaml
USER nonroot:nonroot
# MACP sidecar, MCP sidecar, ext_authz, admin (/healthz, /readyz, /metrics)
EXPOSE 50051 3001 9191 9090
ENTRYPOINT ["/usr/local/bin/warden"]
CMD ["serve", "--config", "/etc/warden/warden.yaml"]
