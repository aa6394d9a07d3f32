# tilec service: the API (uvicorn) on a CUDA runtime image so cubins can be built with nvJitLink and
# GPU workers can share the image. Dependencies are installed in their own cached layer.
FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends software-properties-common curl ca-certificates \
    && add-apt-repository -y ppa:deadsnakes/ppa \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3.11 -m venv $VIRTUAL_ENV

WORKDIR /app

# dependencies only (a layer that changes when pyproject.toml does, not when the code does)
COPY pyproject.toml ./
RUN python3.11 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
extra = p['optional-dependencies']; print(chr(10).join(p['dependencies'] + extra['server'] + extra['cuda'] + extra['workers']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

# the code
COPY README.md ./
COPY tilec ./tilec
COPY compiler ./compiler
COPY runtime ./runtime
COPY server ./server
COPY client ./client
COPY migrations ./migrations
COPY alembic.ini ./
RUN pip install --no-deps . \
    && useradd --create-home --uid 10001 tilec \
    && mkdir -p /data && chown tilec /data

USER tilec
ENV TILEC_HOST=0.0.0.0 \
    TILEC_PORT=8000 \
    TILEC_DATA_DIR=/data
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8000/healthz || exit 1
CMD ["tilec", "serve"]
