"""The Docker files are written to run as they are: the compose file parses, names the images, ports
and TILEC_* variables the code reads (each one a Settings field), and gates the API on the database
and the migration; the Dockerfile runs as non-root with a healthcheck."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tilec.cli import _register_all, app
from tilec.server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def env_names(env: dict) -> set[str]:
    return {k for k in env if k.startswith("TILEC_")}


def test_compose_services_and_gates() -> None:
    services = compose()["services"]
    assert set(services) == {"db", "redis", "migrate", "api", "worker"}
    assert services["db"]["image"].startswith("postgres:") and "healthcheck" in services["db"]
    assert services["api"]["image"] == services["migrate"]["image"] == "tilec:latest"
    assert services["api"]["ports"] == ["8000:8000"]
    assert services["migrate"]["command"] == ["tilec", "db", "upgrade"]
    assert services["redis"]["image"].startswith("redis:") and "healthcheck" in services["redis"]
    for name in ("api", "worker"):
        gates = services[name]["depends_on"]
        assert gates == {"db": {"condition": "service_healthy"}, "redis": {"condition": "service_healthy"},
                         "migrate": {"condition": "service_completed_successfully"}}
    assert "deploy" not in services["api"]  # compiles need no GPU; the worker times on one
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert services["worker"]["image"] == "tilec:latest" and "tilec worker --target" in services["worker"]["command"][-1]


def test_compose_environment_is_what_settings_read() -> None:
    fields = {f"TILEC_{name.upper()}" for name in Settings.model_fields}
    services = compose()["services"]
    used: set[str] = set()
    for service in ("migrate", "api", "worker"):
        used |= env_names(services[service]["environment"])
    assert used and used <= fields, sorted(used - fields)
    api = services["api"]["environment"]
    assert api["TILEC_PORT"] == services["api"]["ports"][0].split(":")[1]
    assert api["TILEC_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert api["TILEC_BROKER_URL"] == services["worker"]["environment"]["TILEC_BROKER_URL"] == "redis://redis:6379/0"
    db_env = services["db"]["environment"]
    assert f"{db_env['POSTGRES_USER']}:{db_env['POSTGRES_PASSWORD']}@db:5432/{db_env['POSTGRES_DB']}" in api["TILEC_DATABASE_URL"]
    # the settings parse from exactly this environment
    settings = Settings(**{k[len("TILEC_"):].lower(): v for k, v in api.items()})
    assert settings.auth_enabled and settings.port == 8000


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM nvidia/cuda:12\.[\d.]+-runtime-ubuntu22\.04$", text, re.M)
    assert re.search(r"^USER tilec$", text, re.M) and "HEALTHCHECK" in text and "/healthz" in text
    fields = {f"TILEC_{name.upper()}" for name in Settings.model_fields}
    assert set(re.findall(r"\bTILEC_[A-Z_]+", text)) <= fields
    # the dependencies (read from pyproject.toml) install in a layer before the code is copied
    assert text.index("pip install -r /tmp/requirements.txt") < text.index("COPY compiler ./compiler")
    assert "extra['server'] + extra['cuda'] + extra['workers']" in text and "COPY tilec ./tilec" in text


def test_cli_commands_used_by_the_images_exist() -> None:
    _register_all()
    runner = CliRunner()
    for args in (["serve", "--help"], ["worker", "--help"], ["db", "upgrade", "--help"], ["token", "create", "--help"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
