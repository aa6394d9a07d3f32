"""GET /docs (Swagger UI) and /redoc, with their scripts, styles and icon served from /docs/assets/.

The assets ship inside the fastapi-offline package, so the pages work on a cluster network without
internet access; FastAPI's own pages load them from a CDN and stay blank there.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

ASSETS_URL = "/docs/assets"
ASSET_DIR = Path(str(files("fastapi_offline").joinpath("static")))
# name -> media type; an explicit list, so nothing else in that folder is reachable
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
CACHE = "public, max-age=86400"  # the files change only with the package's version
# validatorUrl None: Swagger UI would otherwise send the spec to validator.swagger.io for a badge
SWAGGER_PARAMETERS = {"validatorUrl": None}

router = APIRouter(include_in_schema=False)


def _urls(request: Request) -> tuple[str, str]:
    """The OpenAPI document's URL and the assets' base, under the root path a proxy mounted us at."""
    root = request.scope.get("root_path", "").rstrip("/")
    return f"{root}{request.app.openapi_url}", f"{root}{ASSETS_URL}"


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    openapi, assets = _urls(request)
    return get_swagger_ui_html(
        openapi_url=openapi,
        title=f"{request.app.title} - API docs",
        swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css",
        swagger_favicon_url=f"{assets}/favicon.png",
        swagger_ui_parameters={**(request.app.swagger_ui_parameters or {}), **SWAGGER_PARAMETERS},
    )


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    openapi, assets = _urls(request)
    return get_redoc_html(
        openapi_url=openapi,
        title=f"{request.app.title} - API reference",
        redoc_js_url=f"{assets}/redoc.standalone.js",
        redoc_favicon_url=f"{assets}/favicon.png",
        with_google_fonts=False,
    )


# ReDoc's bundle shows a Redocly logo fetched from its CDN: on a network without internet that is a
# request that hangs or fails. The bundle is served with that one URL replaced by an empty inline image.
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
EMPTY_SVG = b"data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E"
_patched: dict[str, bytes] = {}


def _redoc_bundle() -> bytes:
    if "redoc" not in _patched:
        _patched["redoc"] = (
            (ASSET_DIR / "redoc.standalone.js").read_bytes().replace(REDOC_CDN_LOGO, EMPTY_SVG)
        )
    return _patched["redoc"]


@router.get("/")
def root(request: Request) -> RedirectResponse:
    """A person who opens the service's address lands on the web page."""
    return RedirectResponse(request.scope.get("root_path", "").rstrip("/") + "/ui", status_code=307)


def _asset_route(name: str, media_type: str) -> None:
    path = ASSET_DIR / name

    async def asset() -> Response:
        if name == "redoc.standalone.js":
            return Response(_redoc_bundle(), media_type=media_type, headers={"Cache-Control": CACHE})
        return FileResponse(path, media_type=media_type, headers={"Cache-Control": CACHE})

    router.add_api_route(f"{ASSETS_URL}/{name}", asset, methods=["GET"], name=f"docs-asset:{name}")


for _name, _media_type in ASSETS.items():
    _asset_route(_name, _media_type)
