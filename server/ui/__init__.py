"""The web page for the team's cache (/ui): Jinja2 shells in templates/, our script and style and the
vendored chart library (Observable Plot on d3, each with its licence) in static/. The pages are served
by server/api/routes/ui_pages.py and filled from the JSON of server/api/routes/ui_data.py.
"""

from __future__ import annotations

from pathlib import Path

TEMPLATE_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
