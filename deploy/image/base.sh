#!/usr/bin/env bash
# Make a local stand-in for python:3.11-slim when Docker Hub cannot be reached.
#
# The Dockerfile starts FROM ${BASE_IMAGE} (python:3.11-slim by default). Where only
# Debian's mirror and PyPI are reachable, this builds a Debian bookworm image with
# debootstrap (bookworm's python3 is 3.11) and `docker import`s it under a tag, so
# `docker build --build-arg BASE_IMAGE=<tag>` builds the unchanged Dockerfile. It gives
# what the Dockerfile uses from python:3.11-slim: `python` and `pip` on PATH, apt,
# useradd, CA certificates, a UTF-8 locale. PIP_BREAK_SYSTEM_PACKAGES=1 (and uv's twin) lets
# pip and uv install into bookworm's system Python (PEP 668), as they do in python:3.11-slim;
# UV_NATIVE_TLS=1 makes uv trust the system store as Debian's pip does. CA certificates
# the host added locally (/usr/local/share/ca-certificates, e.g. a TLS-inspecting egress
# proxy's) are trusted in the stand-in too, so pip reaches PyPI from the build as it does
# from the host; Debian's pip uses the system trust store.
#
# Cached by tag: if the tag exists, nothing is done. Options (environment):
#   ANALYST_ENV_BASE_TAG    the tag to make (default analyst-env-base:bookworm-py3.11)
#   ANALYST_ENV_BUILD_DIR   where the root filesystem is made, outside /tmp
#                           (default /var/lib/analyst_env-image; removed after import)
#   DEBIAN_MIRROR           (default http://deb.debian.org/debian)
# Prints the tag on stdout.
set -euo pipefail

DOCKER=${DOCKER:-docker}
TAG=${ANALYST_ENV_BASE_TAG:-analyst-env-base:bookworm-py3.11}
BUILD_DIR=${ANALYST_ENV_BUILD_DIR:-/var/lib/analyst_env-image}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
    echo "base: $TAG exists (cached)" >&2
    echo "$TAG"
    exit 0
fi
command -v debootstrap >/dev/null 2>&1 || { echo "base: no debootstrap (apt-get install debootstrap)" >&2; exit 1; }

started=$(date +%s)
ROOTFS=$BUILD_DIR/rootfs
mkdir -p "$BUILD_DIR"
rm -rf "$ROOTFS"
debootstrap --variant=minbase --include=ca-certificates,netbase,tzdata,passwd \
    bookworm "$ROOTFS" "$MIRROR" >"$BUILD_DIR/debootstrap.log" 2>&1 \
    || { tail -20 "$BUILD_DIR/debootstrap.log" >&2; exit 1; }

cat >"$ROOTFS/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
fi
chroot "$ROOTFS" /bin/sh -c '
    set -e
    update-ca-certificates >/dev/null
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-pip python3-venv >/dev/null
    ln -sf /usr/bin/python3 /usr/local/bin/python
    ln -sf /usr/bin/pip3 /usr/local/bin/pip
    apt-get clean
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
' >"$BUILD_DIR/chroot.log" 2>&1 || { tail -20 "$BUILD_DIR/chroot.log" >&2; exit 1; }

tar -C "$ROOTFS" --numeric-owner -c . | "$DOCKER" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1 UV_BREAK_SYSTEM_PACKAGES=1 UV_NATIVE_TLS=1' \
    --change 'CMD ["python3"]' \
    - "$TAG" >/dev/null
rm -rf "$ROOTFS"
echo "base: made $TAG in $(( $(date +%s) - started )) s" >&2
echo "$TAG"
