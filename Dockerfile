# analyst_env server image: `docker build -t analyst-env . && docker run -p 8000:8000 -e ANALYST_ENV_TOKEN=... analyst-env`
# Serves the shipped tasks on local fork-server sandboxes. Inside a container the
# server must listen on 0.0.0.0, so a token is required: pass -e ANALYST_ENV_TOKEN=...
# (or set ANALYST_ENV_INSECURE=1 to serve without one, e.g. behind a private proxy).
# Which sandbox isolation a container gets depends on its `docker run` options (README,
# "Publishing the image / hub Space"); GET /sandbox reports the mode in force.
#
# BASE_IMAGE: any image with Python 3.11, `python`/`pip` on PATH and apt. CI, which cannot
# reach Docker Hub, builds a Debian bookworm stand-in (deploy/image/base.sh).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ANALYST_ENV_CACHE=/var/cache/analyst_env

# LibreOffice recalculates the formulas of workbooks the agent writes before they are
# scored (README, "Formula recalculation"); without it only cached values are compared.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libreoffice-calc-nogui \
    && rm -rf /var/lib/apt/lists/*

# The dependencies first (their layer stays cached while only the code changes), then
# the package itself as an editable install of /app/env: its code then lives apart from
# the site-packages tree that kernels import pandas from (the sandbox hides the package
# in either layout; this keeps it out of the tree kernels must be shown at all).
WORKDIR /app/env
COPY pyproject.toml /app/env/
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY . /app/env
RUN pip install --no-cache-dir --no-deps -e /app/env

# Run as an unprivileged user (uid 1000) that owns the cache and the state directory.
# The image runs with a read-only root (`--read-only --tmpfs /tmp`, docs/publishing.md):
# the server writes only the state directory (a declared volume, so `docker run` gives
# it a writable anonymous volume with this ownership when none is mounted), /tmp and the
# episodes' directories beneath it. Hence:
# - the home directory is /tmp (root's too, for `-u 0`): matplotlib, IPython and fontconfig
#   write their config and caches under $HOME (the sandbox's zygotes, started without
#   $HOME, find it in /etc/passwd). A read-only home made them fall back to temporary
#   directories, and a zygote that looked one up made every kernel inherit /tmp as its
#   temp directory, which Landlock refuses (openpyxl could not save a workbook);
# - fontconfig's caches are made again here: the ones apt made record sub-second mtimes,
#   which the image's layers do not keep, so every process found them stale;
# - the starter set is data in the package, read in place; generated datasets need a
#   writable ANALYST_ENV_CACHE (docs/publishing.md).
RUN useradd --uid 1000 --user-group --home-dir /tmp --no-create-home user \
    && sed -i '/^root:/s#:/root:#:/tmp:#' /etc/passwd \
    && fc-cache -fs \
    && mkdir -p /var/cache/analyst_env /var/lib/analyst_env \
    && chown -R user:user /var/cache/analyst_env /var/lib/analyst_env
# A container without root gets no writable cgroups, so memory and pids are limited per
# kernel process (RLIMIT_AS, the cell limits), not per episode; without this consent the
# server refuses to start there (docs/security.md). A hub Space cannot pass options, so the
# image gives it; `-e ANALYST_ENV_PER_PROCESS_LIMITS=0` restores the refusal.
ENV ANALYST_ENV_STATE_DIR=/var/lib/analyst_env \
    ANALYST_ENV_PER_PROCESS_LIMITS=1
USER user
VOLUME ["/var/lib/analyst_env"]

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"
CMD ["sh", "-c", "exec analyst-env serve --host 0.0.0.0 --port 8000 ${ANALYST_ENV_INSECURE:+--insecure}"]
