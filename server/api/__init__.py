"""The HTTP API: dependencies (deps.py) and one router per resource (routes/)."""
