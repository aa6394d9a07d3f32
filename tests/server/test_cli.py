"""`tilec db upgrade|downgrade` and `tilec token create|ls|revoke` against the test databases (and, for
`--server` or its old spelling `--url`, a real uvicorn process)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tilec.cli import _register_all, app

from .conftest import Uvicorn


@pytest.fixture(scope="module")
def cli() -> CliRunner:
    _register_all()
    return CliRunner()


async def test_token_create_then_use(
    cli: CliRunner, database_url: str, tmp_path: Path, make_client: Callable[..., httpx.AsyncClient]
) -> None:
    env = {"TILEC_DATABASE_URL": database_url, "TILEC_DATA_DIR": str(tmp_path)}
    result = cli.invoke(app, ["token", "create", "--scope", "read", "--description", "ci"], env=env)
    assert result.exit_code == 0, result.output
    token = result.output.strip().splitlines()[-1]
    assert token.startswith("tlc_")
    async with make_client(auth=True) as client:
        ok = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        denied = await client.post("/v1/kernels", json={"ir": "x"}, headers={"Authorization": f"Bearer {token}"})
        assert denied.status_code == 403


def test_token_create_refuses_unknown_scope(cli: CliRunner, tmp_path: Path) -> None:
    result = cli.invoke(app, ["token", "create", "--scope", "root"], env={"TILEC_DATA_DIR": str(tmp_path)})
    assert result.exit_code != 0 and "unknown scope" in result.output


def test_db_upgrade_and_downgrade_on_sqlite(cli: CliRunner, tmp_path: Path) -> None:
    env = {"TILEC_DATA_DIR": str(tmp_path)}  # the embedded default: a SQLite file under the data dir
    assert cli.invoke(app, ["db", "upgrade"], env=env).exit_code == 0
    assert (tmp_path / "tilec.db").exists()
    assert cli.invoke(app, ["db", "downgrade", "base"], env=env).exit_code == 0
    assert cli.invoke(app, ["db", "upgrade"], env=env).exit_code == 0


def test_token_ls_and_revoke_in_the_database(cli: CliRunner, database_url: str, tmp_path: Path) -> None:
    env = {"TILEC_DATABASE_URL": database_url, "TILEC_DATA_DIR": str(tmp_path)}
    cli.invoke(app, ["token", "create", "--scope", "read", "--description", "laptop"], env=env)
    listed = cli.invoke(app, ["token", "ls"], env=env)
    assert listed.exit_code == 0, listed.output
    header, row = listed.output.strip().splitlines()
    assert header.split("\t") == ["id", "scopes", "created", "revoked", "description"]
    token_id, scopes, _created, state, description = row.split("\t")
    assert (scopes, state, description) == ("read", "active", "laptop")
    revoked = cli.invoke(app, ["token", "revoke", token_id], env=env)
    assert revoked.exit_code == 0 and revoked.output.startswith(f"token {token_id} revoked at ")
    assert cli.invoke(app, ["token", "ls"], env=env).output.splitlines()[1].split("\t")[3] != "active"
    missing = cli.invoke(app, ["token", "revoke", "4242"], env=env)
    assert missing.exit_code == 1 and "no token 4242" in missing.output


def test_token_revoke_through_the_api_is_immediate(
    cli: CliRunner, database_url: str, tmp_path: Path, uvicorn_server: Callable[..., Uvicorn]
) -> None:
    env = {"TILEC_DATABASE_URL": database_url, "TILEC_DATA_DIR": str(tmp_path)}
    admin = cli.invoke(app, ["token", "create", "--scope", "admin"], env=env).output.strip()
    reader = cli.invoke(app, ["token", "create", "--scope", "read"], env=env).output.strip()
    server = uvicorn_server(TILEC_AUTH="true")
    for _ in range(2):  # the token is now in the server's cache
        assert httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {reader}"}).status_code == 200
    remote = {**env, "TILEC_TOKEN": admin}
    rows = cli.invoke(app, ["token", "ls", "--server", server.url], env=remote).output.strip().splitlines()
    reader_id = rows[-1].split("\t")[0]
    assert len(rows) == 3 and rows[0].startswith("id\t") and rows[-1].split("\t")[3] == "active"
    denied = cli.invoke(app, ["token", "revoke", reader_id, "--url", server.url, "--token", reader], env=env)
    assert denied.exit_code == 1 and "forbidden" in denied.output
    result = cli.invoke(app, ["token", "revoke", reader_id, "--server", server.url], env=remote)
    assert result.exit_code == 0, result.output
    assert httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {reader}"}).status_code == 401
