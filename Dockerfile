# syntax=docker/dockerfile:1
# The platform as a static binary on a distroless, non-root base.
#
#   docker build --build-arg VERSION=1.2.3 -t ghcr.io/opsmcp/platform:1.2.3 .

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
	CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags="-s -w -X main.version=${VERSION}" -o /out/platform ./cmd/platform \
	&& mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/platform /platform
# The embedded SQLite database's default home (./data from /): a volume for
# `docker run` without PostgreSQL. The Helm chart uses PostgreSQL and runs
# with a read-only root.
COPY --from=build --chown=65532:65532 /out/data /data
WORKDIR /
VOLUME /data
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/platform", "serve"]
