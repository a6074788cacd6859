#!/usr/bin/env bash
# Start a Docker engine if none answers, so the image can be built and run as published.
#
# CI machines have Debian's docker.io installed but no engine running (and no systemd to
# start one). This starts dockerd in the background with its state outside /tmp, waits
# until it answers, and prints the DOCKER_HOST to use. An engine that already answers is
# left alone. Options (environment):
#   ANALYST_ENV_DOCKER_ROOT   dockerd --data-root (default /var/lib/analyst_env-docker)
#   ANALYST_ENV_DOCKERD_ARGS  extra dockerd flags (default: --iptables=false)
# Exit 0 with the engine answering, 1 if it could not be started (the log says why).
set -euo pipefail

DOCKER=${DOCKER:-docker}
ROOT=${ANALYST_ENV_DOCKER_ROOT:-/var/lib/analyst_env-docker}
# Without iptables rules the default bridge still gives containers a private network and
# published ports still work (docker-proxy); containers just get no NAT to the outside.
ARGS=${ANALYST_ENV_DOCKERD_ARGS:---iptables=false}
SOCK=${ROOT}/docker.sock
LOG=${ROOT}/dockerd.log

answers() { "$DOCKER" "$@" version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if [ -z "${DOCKER_HOST:-}" ] && answers; then
    echo "engine: already running (default socket)" >&2
    exit 0
fi
if [ -S "$SOCK" ] && DOCKER_HOST="unix://$SOCK" answers; then
    echo "engine: already running at unix://$SOCK" >&2
    echo "unix://$SOCK"
    exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
    echo "engine: no dockerd (apt-get install docker.io)" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "engine: dockerd needs root" >&2
    exit 1
fi

mkdir -p "$ROOT"
if [ -f "$ROOT/dockerd.pid" ] && kill -0 "$(cat "$ROOT/dockerd.pid")" 2>/dev/null; then
    echo "engine: dockerd $(cat "$ROOT/dockerd.pid") runs but does not answer yet; waiting" >&2
else
    # setsid: the engine outlives this script and the CI step that started it.
    # shellcheck disable=SC2086
    setsid dockerd --data-root "$ROOT/data" --exec-root "$ROOT/exec" --pidfile "$ROOT/dockerd.pid" \
        -H "unix://$SOCK" $ARGS >"$LOG" 2>&1 </dev/null &
fi
for _ in $(seq 1 120); do
    if DOCKER_HOST="unix://$SOCK" answers; then
        echo "engine: dockerd $(cat "$ROOT/dockerd.pid" 2>/dev/null) answers at unix://$SOCK (log $LOG)" >&2
        echo "unix://$SOCK"
        exit 0
    fi
    sleep 0.5
done
echo "engine: dockerd did not answer in 60 s; last lines of $LOG:" >&2
tail -20 "$LOG" >&2 || true
exit 1
