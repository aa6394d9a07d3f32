"""per-pass dumps kept with a build: artifacts.pass_dumps, the tile IR after each pass as its compile made
it (zlib-compressed JSON), which the web page shows; rows from before stay NULL (recomputed on demand)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("pass_dumps", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_column("pass_dumps")
