# Warden: a static binary on a distroless base, running as a non-root user.
# (docker build needs a Docker engine, which the project's build machines lack;
# the binary itself is built and tested by `make build` / `make test`.)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /warden ./cmd/warden

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /warden /usr/local/bin/warden
USER nonroot:nonroot
EXPOSE 50052 9191 9090
ENTRYPOINT ["/usr/local/bin/warden"]
CMD ["serve", "--config", "/etc/warden/warden.yaml"]
