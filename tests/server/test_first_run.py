"""The first five minutes of a new user: `tilec serve` says where it listens, which database it uses,
where /docs is and whether auth is on; access logs on request; /docs and /redoc work without
internet; README.md and docs/*.md link only to files a clone has."""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from sqlalchemy.engine import make_url

from .conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
MEDIA = {".js": "text/javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}


# tilec serve: the banner and the access log


class Serve:
    """`tilec serve` as a real process on a free port; its stdout and stderr are read line by line."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.port = free_port()
        exe = Path(sys.executable).with_name("tilec")
        cmd = (
            [str(exe)]
            if exe.exists()
            else [sys.executable, "-c", "from tilec.cli import main; main()"]
        )
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TILEC_")}
        self.proc = subprocess.Popen(
            [*cmd, "serve", "--port", str(self.port), *args],
            env={**clean, "PYTHONUNBUFFERED": "1", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def read(self, n: int, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        got = []
        while len(got) < n:
            try:
                got.append(self.lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"tilec serve printed {got} and then nothing for {timeout} s") from None
        return got

    def wait_healthy(self, url: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"tilec serve exited with {self.proc.returncode}"
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise AssertionError(f"nothing healthy at {url} in {timeout} s")

    def stop(self) -> list[str]:
        """Stop the server; the lines it printed that were not read yet."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        rest = []
        while not self.lines.empty():
            rest.append(self.lines.get())
        return rest


@pytest.fixture
def serve() -> Iterator[type[Serve]]:
    started: list[Serve] = []

    def start(args: list[str], env: dict[str, str]) -> Serve:
        server = Serve(args, env)
        started.append(server)
        return server

    yield start  # type: ignore[misc]
    for server in started:
        server.stop()


def test_serve_banner(serve: type[Serve], database_url: str, tmp_path: Path) -> None:
    """Listens where it says, names the database (never its password), the docs and the auth state."""
    env = {"TILEC_DATA_DIR": str(tmp_path)}
    if database_url.startswith("sqlite"):
        want_db = f"sqlite:///{tmp_path / 'tilec.db'}"  # the embedded default, under the data dir
    else:  # the test server trusts local connections, so a password in the URL is accepted and unused
        url = make_url(database_url).set(password="s3cret-pw").render_as_string(hide_password=False)
        env["TILEC_DATABASE_URL"] = url + "?application_name=tilec"
        env["TILEC_AUTH"] = "true"
        want_db = env["TILEC_DATABASE_URL"].replace("s3cret-pw", "***")
    server = serve([], env)
    first = server.read(5)
    text = "\n".join(first)
    base = f"http://127.0.0.1:{server.port}"
    assert first[0] == f"tilec: listening on {base}", text
    assert re.search(rf"^\s*database:\s+{re.escape(want_db)}$", text, re.M), text
    assert "s3cret-pw" not in text
    assert re.search(rf"^\s*API docs:\s+{re.escape(base)}/docs$", text, re.M), text
    auth = "on" if "TILEC_AUTH" in env else "off"
    assert re.search(rf"^\s*auth:\s+{auth}\b", text, re.M), text
    assert re.search(r"^\s*access log:\s+off\b", text, re.M), text
    server.wait_healthy(base)
    docs = httpx.get(f"{base}/docs", timeout=5)
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    assert "s3cret-pw" not in "\n".join(server.stop())


def test_serve_on_a_port_in_use_prints_no_banner(serve: type[Serve], tmp_path: Path) -> None:
    """The banner comes once the port is bound: a port in use is one line and a failure exit, not
    "listening on" followed by "address already in use"."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        # the later --port wins over the free one Serve gives first
        server = serve(["--port", str(taken.getsockname()[1])], {"TILEC_DATA_DIR": str(tmp_path)})
        assert server.proc.wait(60) != 0
    printed = "\n".join(server.stop())
    assert "address already in use" in printed.lower(), printed
    assert "listening on" not in printed, printed


@pytest.mark.parametrize("how", ["flag", "env", "off"])
def test_serve_access_log(serve: type[Serve], tmp_path: Path, how: str) -> None:
    env = {"TILEC_DATA_DIR": str(tmp_path)}
    args = ["--access-log"] if how == "flag" else []
    if how == "env":
        env["TILEC_ACCESS_LOG"] = "true"
    server = serve(args, env)
    banner = "\n".join(server.read(5))
    assert re.search(rf"^\s*access log:\s+{'off' if how == 'off' else 'on'}\b", banner, re.M), banner
    base = f"http://127.0.0.1:{server.port}"
    server.wait_healthy(base)
    assert httpx.get(f"{base}/v1/kernels/{'0' * 64}", timeout=5).status_code == 404
    request_line = f'"GET /v1/kernels/{"0" * 64} HTTP/1.1" 404'
    if how == "off":
        assert not [line for line in server.stop() if "GET /" in line]
        return
    deadline = time.monotonic() + 10
    seen: list[str] = []
    while not any(request_line in line for line in seen):
        assert time.monotonic() < deadline, f"no access log line in {seen}"
        seen += server.read(1, timeout=10)


def test_masked_url_hides_passwords() -> None:
    from tilec.server.cli import masked_url

    assert masked_url("postgresql+psycopg://u:pw@db:5432/tilec") == "postgresql+psycopg://u:***@db:5432/tilec"
    assert "pw" not in masked_url("postgresql+psycopg://u@db/tilec?password=pw&sslmode=require")
    assert masked_url("sqlite:////data/tilec.db") == "sqlite:////data/tilec.db"
    assert "TILEC_DATABASE_URL" in masked_url("not a url")


# the Makefile: `make serve` installs only the server extra, once; `make test` the test extra


@pytest.fixture
def fake_checkout(tmp_path: Path) -> Path:
    """The Makefile and pyproject.toml beside a .venv whose pip and tilec only note how they were called."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").touch()
    for tool in ("pip", "tilec"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "{tmp_path}/calls.log"\n')
        (bin_dir / tool).chmod(0o755)
    old = time.time() - 100
    os.utime(tmp_path / "pyproject.toml", (old, old))
    return tmp_path


def make(checkout: Path, target: str) -> list[str]:
    """Run a make target; the pip and tilec calls it made."""
    log = checkout / "calls.log"
    log.unlink(missing_ok=True)
    subprocess.run(["make", "-s", target], cwd=checkout, check=True, capture_output=True, timeout=60)
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_serve_installs_the_server_extra_once(fake_checkout: Path) -> None:
    assert make(fake_checkout, "serve") == ["pip install -q -e .[server]", "tilec serve"]
    assert make(fake_checkout, "serve") == ["tilec serve"]  # the second run installs nothing
    assert make(fake_checkout, "install") == ["pip install -q -e .[test]"]  # what `make test` installs
    assert make(fake_checkout, "install") == []
    assert make(fake_checkout, "serve") == ["tilec serve"]
    # pyproject.toml changed: each stamp is redone by its own target
    stamps = list((fake_checkout / ".venv").glob(".installed-*"))
    assert len(stamps) == 2
    for stamp in stamps:
        os.utime(stamp, (time.time() - 50,) * 2)
    os.utime(fake_checkout / "pyproject.toml", (time.time() - 20,) * 2)
    assert make(fake_checkout, "serve") == ["pip install -q -e .[server]", "tilec serve"]
    assert make(fake_checkout, "install") == ["pip install -q -e .[test]"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_serve_after_make_test_installs_nothing(fake_checkout: Path) -> None:
    assert make(fake_checkout, "install") == ["pip install -q -e .[test]"]
    assert make(fake_checkout, "serve") == ["tilec serve"]  # the test extra holds the server extra


# /docs and /redoc offline


class _Refs(HTMLParser):
    """Every URL a page makes the browser load: script src, link href, img src."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href", "img": "src"}.get(tag)
        self.urls += [v for k, v in attrs if k == wanted and v]


def page_refs(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    # the spec the page's script fetches: Swagger UI's `url: '...'`, ReDoc's spec-url="..."
    spec = re.findall(r"""\burl:\s*['"]([^'"]+)['"]|spec-url=["']([^"']+)["']""", html)
    return parser.urls + [a or b for a, b in spec]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_api_docs_load_only_local_assets(client: httpx.AsyncClient, page: str) -> None:
    r = await client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    refs = page_refs(r.text)
    assert any(u.endswith(".js") for u in refs) and any("openapi" in u for u in refs), refs
    if page == "/docs":
        assert any(u.endswith(".css") for u in refs), refs
    # nothing that needs the internet: no absolute URL anywhere in the page, not only in the tags
    assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", r.text, re.I), r.text
    for ref in refs:
        url = urljoin(str(r.url), ref)
        assert urlsplit(url).netloc == urlsplit(str(r.url)).netloc, ref
        asset = await client.get(url)
        assert asset.status_code == 200, (ref, asset.status_code)
        want = MEDIA[Path(urlsplit(url).path).suffix]
        assert asset.headers["content-type"].split(";")[0] == want, (ref, asset.headers["content-type"])
        assert len(asset.content) > 100, ref


async def test_redoc_bundle_fetches_nothing_from_a_cdn(client: httpx.AsyncClient) -> None:
    """The bundle's own fetch of a Redocly logo (an <img> it renders) is served replaced; no other
    https:// fetch of an image or script remains in it."""
    bundle = (await client.get("/docs/assets/redoc.standalone.js")).text
    assert len(bundle) > 100_000 and "cdn.redoc.ly" not in bundle
    assert not re.search(r"""src:\s*["']https?://""", bundle)


async def test_the_root_sends_a_person_to_the_web_page(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 307 and r.headers["location"] == "/ui", r.headers
    assert (await client.get("/ui", follow_redirects=True)).status_code == 200


async def test_docs_assets_are_a_closed_list(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200
    for name in ("__init__.py", "../__init__.py", "%2e%2e/__init__.py", "core.py"):
        assert (await client.get(f"/docs/assets/{name}")).status_code == 404, name


# README.md and docs/*.md


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*)?\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*\b(?:href|src)=["']([^"']+)["']""", re.I)
CODE_PATH = re.compile(r"`([\w.*-]+(?:/[\w.*-]+)+/?)`")  # `server/settings.py`, `compiler/tune/`


def relative_links(text: str) -> list[str]:
    found = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text) + HTML_LINK.findall(text)
    return [u for u in found if not re.match(r"[a-z][a-z0-9+.-]*:|#", u, re.I)]  # not URLs, not anchors


def test_docs_stand_alone() -> None:
    """A clone has no ../shared: nothing links there, every relative link and every repository path
    named in code spans resolves inside the repository, and the README points at the architecture page."""
    assert (ROOT / "docs" / "ARCHITECTURE.md").is_file()
    readme = (ROOT / "README.md").read_text()
    assert "docs/ARCHITECTURE.md" in relative_links(readme)
    for md in markdown_files():
        text = md.read_text()
        name = md.relative_to(ROOT)
        assert not re.search(r"\.\./shared|\bshared/DESIGN", text), f"{name} refers to ../shared"
        for link in relative_links(text):
            target = (md.parent / link.split("#")[0]).resolve()
            assert target.exists() and ROOT in target.parents, f"{name}: broken link {link}"
        for path in CODE_PATH.findall(text):
            assert list(ROOT.glob(path.rstrip("/"))), f"{name}: `{path}` is not in the repository"


def test_link_checker_sees_every_kind_of_link() -> None:
    text = '[a](docs/X.md) [c](https://x.org) [d](#top)\n[e]: ../f.md\n<a href="g.md">g</a>'
    assert relative_links(text) == ["docs/X.md", "../f.md", "g.md"]
