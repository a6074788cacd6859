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
RUN pip install --no-cache-dir --no-deps -e /app/env \
    && analyst-env tasks --dataset starter > /dev/null

# Run as an unprivileged user that owns the cache and the recorded trajectories.
RUN useradd --create-home --uid 1000 user \
    && mkdir -p /var/cache/analyst_env /var/lib/analyst_env \
    && chown -R user /var/cache/analyst_env /var/lib/analyst_env
ENV ANALYST_ENV_STATE_DIR=/var/lib/analyst_env
USER user

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"
CMD ["sh", "-c", "exec analyst-env serve --host 0.0.0.0 --port 8000 ${ANALYST_ENV_INSECURE:+--insecure}"]
