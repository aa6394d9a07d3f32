"""The contract fuzz of test_schemathesis.py on PostgreSQL (see there), in a file of its own: pytest-xdist
hands out whole files, so the SQLite and PostgreSQL runs go to the two test processes."""

from __future__ import annotations

import pytest

from tests.server.test_schemathesis import test_api_keeps_its_contract  # noqa: F401 - collected here too

pytestmark = pytest.mark.parametrize("migrated_database", ["postgresql"], indirect=True)
