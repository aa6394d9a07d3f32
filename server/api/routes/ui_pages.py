"""GET /ui/...: the web page's shells (Jinja2 templates) and its static files (our script and style, the
chart library vendored with its licence). A shell carries no data and needs no token: the script fills
it from the /v1/ui JSON routes, sending the token the visitor pasted (kept in sessionStorage) in the
Authorization header, so a token never appears in a URL or a cookie.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from tilec.wire import Text

from ... import errors as E
from ...ui import STATIC_DIR, TEMPLATE_DIR

router = APIRouter(prefix="/ui", include_in_schema=False)
templates = Jinja2Templates(directory=TEMPLATE_DIR)
Key = Annotated[Text, Path(min_length=1, max_length=128)]
# scripts and styles from this origin only; Plot sets style attributes on the SVG it draws
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
               ".txt": "text/plain; charset=utf-8", ".md": "text/plain; charset=utf-8"}  # fmt: skip


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    media_type: str
    etag: str


def _load_static() -> dict[str, StaticFile]:
    """Every file under static/, read once: only these names are served (no path reaches the disk)."""
    out = {}
    for path in sorted(STATIC_DIR.rglob("*")):
        if path.is_file() and path.suffix in MEDIA_TYPES:
            body = path.read_bytes()
            name = path.relative_to(STATIC_DIR).as_posix()
            out[name] = StaticFile(
                body, MEDIA_TYPES[path.suffix], f'"{hashlib.sha256(body).hexdigest()[:32]}"'
            )
    return out


STATIC = _load_static()


def _page(
    request: Request, template: str, *, title: str, view: str, section: str, key: str = ""
) -> HTMLResponse:
    root = request.scope.get("root_path", "").rstrip("/")
    context = {"title": title, "view": view, "section": section, "key": key, "root": root}
    return templates.TemplateResponse(request, template, context, headers=SECURITY_HEADERS)


@router.get("")
def home(request: Request) -> RedirectResponse:
    return RedirectResponse(request.scope.get("root_path", "").rstrip("/") + "/ui/kernels", status_code=307)


@router.get("/kernels", response_class=HTMLResponse)
def kernels(request: Request) -> HTMLResponse:
    return _page(request, "kernels.html", title="Kernels", view="kernels", section="kernels")


@router.get("/kernels/{key}", response_class=HTMLResponse)
def kernel(request: Request, key: Key) -> HTMLResponse:
    return _page(request, "kernel.html", title="Kernel", view="kernel", section="kernels", key=key)


@router.get("/artifacts/{artifact_id}", response_class=HTMLResponse)
def artifact(request: Request, artifact_id: Key) -> HTMLResponse:
    return _page(
        request, "artifact.html", title="Artifact", view="artifact", section="kernels", key=artifact_id
    )


@router.get("/tuning", response_class=HTMLResponse)
def tuning(request: Request) -> HTMLResponse:
    return _page(request, "tuning.html", title="Tuning results", view="tuning", section="tuning")


@router.get("/tuning/{tuning_key}", response_class=HTMLResponse)
def result(request: Request, tuning_key: Key) -> HTMLResponse:
    return _page(
        request, "result.html", title="Tuning result", view="result", section="tuning", key=tuning_key
    )


@router.get("/jobs", response_class=HTMLResponse)
def jobs(request: Request) -> HTMLResponse:
    return _page(request, "jobs.html", title="Tune jobs", view="jobs", section="jobs")


@router.get("/misses", response_class=HTMLResponse)
def misses(request: Request) -> HTMLResponse:
    return _page(request, "misses.html", title="Misses", view="misses", section="misses")


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job(request: Request, job_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> HTMLResponse:
    return _page(request, "job.html", title="Tune job", view="job", section="jobs", key=str(job_id))


@router.get("/static/{name:path}")
def static(request: Request, name: str) -> Response:
    """Our files, revalidated on each page load (an upgrade shows at once; an unchanged file is a 304)."""
    found = STATIC.get(name)
    if found is None:
        raise E.ApiError(404, E.NOT_FOUND, E.MSG_UI_FILE_NOT_FOUND.format(name=name[:200]))
    headers = {"ETag": found.etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if found.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)
