# The agentrunner image: one static binary on distroless, as a non-root user,
# with the workspace on the /data volume. See the README's "Deployment".
#
#   docker build -t agentrunner .
#   docker run --rm -v agentrunner-data:/data agentrunner init /data
#   docker run -d -v agentrunner-data:/data agentrunner
#
# The final stage is gcr.io/distroless/static: the binary is static
# (CGO_ENABLED=0, the SQLite store is pure Go), so it needs only what that
# image has (CA certificates for the providers' HTTPS, time zone data for
# schedules, a passwd entry for the non-root user 65532) and nothing it lacks
# is missed: no shell, no package manager, a few MiB. Agents of the process
# provider need their programs (a shell, Node.js, the Claude Code CLI): build
# an image of your own with them and COPY --from this one's binary.

# The Go of go.mod's go line; make test checks the two agree.
ARG GO_VERSION=1.26.0

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# The modules first: a change of the sources alone reuses this layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Cross-compiled on the build machine for the target platform: no emulation.
# VERSION is what agentrunner version prints:
#   docker build --build-arg VERSION=$(git describe --tags --always) .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/agentrunner ./cmd/agentrunner \
 && mkdir /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentrunner /usr/local/bin/agentrunner
# The workspace: agentrunner.yaml, its agents' files, the artifacts and the
# state database. A new named volume takes this directory's owner, so the
# non-root user can write it.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
# The API, when server.listen is 0.0.0.0:8080 (which needs server.auth).
EXPOSE 8080
# serve answers /health/ready on 127.0.0.1:8080 inside the container;
# healthcheck exits 0 when it reports ready (the image has no curl).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["agentrunner", "healthcheck"]
ENTRYPOINT ["agentrunner"]
CMD ["serve", "-c", "/data/agentrunner.yaml"]
