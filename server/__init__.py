"""tilec's service: a FastAPI app over a SQL cache of kernels, artifacts and tuning results.

Importing this package imports nothing; `server.app.create_app` builds the app.
"""
