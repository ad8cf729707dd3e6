#!/bin/sh
# image-test.sh: builds the container image from the Dockerfile and checks
# that a container of it starts healthy as the non-root user 65532, with a
# workspace that init wrote on its /data volume. make test runs it.
#
# It is skipped, with the reason, when no container runtime (docker, else
# podman; CONTAINER_RUNTIME names one) can build and run here, or when the
# base images cannot be pulled. Whatever fails after that is a failure.
set -eu
cd "$(dirname "$0")/.."

image=agentrunner:image-test
name=agentrunner-image-test-$$
volume=agentrunner-image-test-$$

skip() {
	echo "image-test: SKIPPED: $*"
	exit 0
}
fail() {
	echo "image-test: FAILED: $*" >&2
	exit 1
}

# The Dockerfile's Go is go.mod's: checked even without a runtime.
want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
have=$(sed -n 's/^ARG GO_VERSION=\(.*\)$/\1/p' Dockerfile)
[ "$want" = "$have" ] || fail "the Dockerfile builds with Go $have, go.mod says go $want: set ARG GO_VERSION=$want"

# The runtime: one that answers.
candidates=${CONTAINER_RUNTIME:-docker podman}
rt=
for c in $candidates; do
	if command -v "$c" >/dev/null 2>&1 && "$c" info >/dev/null 2>&1; then
		rt=$c
		break
	fi
done
[ -n "$rt" ] || skip "no container runtime answers (tried: $candidates; each is missing or its info fails)"

# Podman builds OCI images by default, which have no HEALTHCHECK.
format=
[ "$rt" = podman ] && format="--format docker"

# The base images, pulled unless present: without them nothing can be built.
for base in "golang:$have" gcr.io/distroless/static-debian12:nonroot; do
	if ! "$rt" image inspect "$base" >/dev/null 2>&1; then
		out=$("$rt" pull "$base" 2>&1) || skip "$rt cannot pull the base image $base: $(echo "$out" | tail -n 1)"
	fi
done

# Whether the runtime runs containers at all (a sandbox may forbid what it
# needs): the Go image runs go version, or nothing is tested.
out=$("$rt" run --rm "golang:$have" go version 2>&1) || skip "$rt cannot run a container here: $(echo "$out" | tail -n 1)"

cleanup() {
	"$rt" rm -f "$name" >/dev/null 2>&1 || true
	"$rt" volume rm -f "$volume" >/dev/null 2>&1 || true
	"$rt" rmi "$image" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "image-test: building $image with $rt"
# shellcheck disable=SC2086
"$rt" build $format -t "$image" . || fail "$rt build failed"

user=$("$rt" image inspect -f '{{.Config.User}}' "$image")
[ "$user" = 65532:65532 ] || fail "the image runs as '$user', want 65532:65532"
# Docker keeps it in .Config, Podman at the top.
health="$("$rt" image inspect -f '{{json .Config.Healthcheck}}' "$image" 2>/dev/null || true) $("$rt" image inspect -f '{{json .HealthCheck}}' "$image" 2>/dev/null || true)"
case $health in *healthcheck*) ;; *) fail "the image has no HEALTHCHECK running agentrunner healthcheck: $health" ;; esac

# init on the volume. An exit status of 125 or more is the runtime's, not
# agentrunner's: the runtime cannot run containers here.
status=0
out=$("$rt" run --rm -v "$volume:/data" "$image" init /data 2>&1) || status=$?
if [ "$status" -ge 125 ]; then
	skip "$rt cannot run a container here: $(echo "$out" | tail -n 1)"
fi
[ "$status" -eq 0 ] || fail "init /data in the container exited $status: $out"

# serve, the image's command: ready without an Execution Service.
out=$("$rt" run -d --name "$name" -v "$volume:/data" \
	--health-interval 2s --health-start-period 60s "$image" 2>&1) || fail "$rt run failed: $out"

i=0
while :; do
	# Podman runs healthchecks from systemd timers; without systemd, run it.
	[ "$rt" = podman ] && "$rt" healthcheck run "$name" >/dev/null 2>&1 || true
	state=$("$rt" inspect -f '{{.State.Health.Status}}' "$name" 2>/dev/null || echo unknown)
	[ "$state" = healthy ] && break
	running=$("$rt" inspect -f '{{.State.Running}}' "$name")
	[ "$running" = true ] || fail "the container stopped: $("$rt" logs "$name" 2>&1 | tail -n 20)"
	i=$((i + 1))
	[ "$i" -lt 60 ] || fail "the container is $state after 2 minutes: $("$rt" logs "$name" 2>&1 | tail -n 20)"
	sleep 2
done

# The process itself runs as 65532, seen from the host where it can be.
pid=$("$rt" inspect -f '{{.State.Pid}}' "$name")
if [ -r "/proc/$pid/status" ]; then
	uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
	[ "$uid" = 65532 ] || fail "serve runs as uid $uid in the container, want 65532"
fi
echo "image-test: ok: $image starts healthy as uid 65532 ($rt)"
