#!/usr/bin/env bash
# Make a local stand-in for the haproxy:2.6 image when Docker Hub cannot be reached.
#
# compose.yaml's balancer runs ${HAPROXY_IMAGE:-haproxy:2.6}. Where only Debian's mirror
# and PyPI are reachable, this builds Debian bookworm's haproxy (2.6) on the bookworm
# stand-in base (deploy/image/base.sh) and gives it what compose.yaml uses of the
# official image: the configuration at /usr/local/etc/haproxy/haproxy.cfg, the
# `haproxy` user, HAProxy in the foreground in master-worker mode, logs on stdout.
#   HAPROXY_IMAGE=$(deploy/compose/haproxy-standin.sh) docker compose ... up
#
# Cached by tag: if the tag exists, nothing is done. Options (environment):
#   ANALYST_ENV_HAPROXY_TAG  the tag to make (default analyst-env-haproxy:bookworm)
# Prints the tag on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."

DOCKER=${DOCKER:-docker}
TAG=${ANALYST_ENV_HAPROXY_TAG:-analyst-env-haproxy:bookworm}

if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
    echo "haproxy: $TAG exists (cached)" >&2
    echo "$TAG"
    exit 0
fi
base=$(deploy/image/base.sh)
started=$(date +%s)
# --network host: the build reaches Debian's mirror as the host does (the engine may
# give its bridge no NAT).
"$DOCKER" build --network host -t "$TAG" - >&2 <<DOCKERFILE
FROM $base
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /usr/local/etc/haproxy
USER haproxy
STOPSIGNAL SIGUSR1
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
DOCKERFILE
echo "haproxy: made $TAG in $(( $(date +%s) - started )) s" >&2
echo "$TAG"
