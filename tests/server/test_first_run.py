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


async def test_docs_assets_are_a_closed_list(client: httpx.AsyncClient) -> None:
    assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200
    for name in ("__init__.py", "../__init__.py", "%2e%2e/__init__.py", "core.py"):
        assert (await client.get(f"/docs/assets/{name}")).status_code == 404, name
