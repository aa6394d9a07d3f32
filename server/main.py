"""The ASGI app for uvicorn (`uvicorn server.main:app`), built from the TILEC_* settings."""

from .app import create_app

app = create_app()
