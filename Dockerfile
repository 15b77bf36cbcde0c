# gostream-node and gostream-ctl in one image.
#
#   docker build -t gostream --build-arg VERSION="$(git describe --always --dirty)" .
#
# The image runs gostream-node as the non-root user gostream (uid 10001),
# configured by GOSTREAM_* environment variables (the twins of its flags, see
# `gostream-node --help`), with its storage root on the /data volume. Ports:
# 9400 RPC, 9401 gossip (TCP and UDP), 9402 HTTP (health, metrics, status).
# docker-compose.yml runs three of them and checks each one's health with
# the gostream-ctl of this image.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static binaries (no cgo), so the runtime image needs no Go or C library.
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gostream-node ./cmd/node \
 && go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gostream-ctl ./cmd/ctl

FROM debian:bookworm-slim
RUN groupadd --system --gid 10001 gostream \
 && useradd --system --uid 10001 --gid gostream --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin gostream \
 && mkdir /data \
 && chown gostream:gostream /data
COPY --from=build /out/gostream-node /usr/local/bin/gostream-node
COPY --from=build /out/gostream-ctl /usr/local/bin/gostream-ctl
USER gostream
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9400/tcp 9401/tcp 9401/udp 9402/tcp 9092/tcp 19400/tcp 19092/tcp
# SIGTERM (docker stop) stops the node cleanly, exit status 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gostream-node"]
