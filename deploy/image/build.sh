#!/usr/bin/env bash
# Build the server image from the repository's Dockerfile, as a publisher would.
#
# Starts a Docker engine if none answers (engine.sh), makes the python:3.11-slim stand-in
# when Docker Hub is out of reach (base.sh), then `docker build`s the Dockerfile unchanged
# but for BASE_IMAGE. The build runs on the host's network: pip wheels come from PyPI and
# apt packages from Debian's mirror, and the engine may have no NAT for its bridge.
# Options (environment):
#   ANALYST_ENV_IMAGE_TAG  the tag to build (default analyst-env:ci)
#   BASE_IMAGE             use this base instead (e.g. python:3.11-slim where Hub is reachable)
# Prints `DOCKER_HOST=...` and `IMAGE=...` lines on stdout (eval-able), timings on stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."

DOCKER=${DOCKER:-docker}
TAG=${ANALYST_ENV_IMAGE_TAG:-analyst-env:ci}

host=$(deploy/image/engine.sh)
if [ -n "$host" ]; then export DOCKER_HOST=$host; fi
base=${BASE_IMAGE:-$(deploy/image/base.sh)}

started=$(date +%s)
"$DOCKER" build --network host --build-arg "BASE_IMAGE=$base" -t "$TAG" . >&2
size=$("$DOCKER" image inspect "$TAG" --format '{{.Size}}')
echo "build: $TAG from $base in $(( $(date +%s) - started )) s, $(( size / 1000000 )) MB" >&2
echo "DOCKER_HOST=${DOCKER_HOST:-}"
echo "IMAGE=$TAG"
