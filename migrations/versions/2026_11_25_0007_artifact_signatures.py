"""build-time signatures: artifacts.signature and artifacts.signing_key_id, the builder's Ed25519
signature over the build manifest, made when the row is stored and served as is; rows from before stay
NULL (their manifests are served unsigned, which clients that pin keys refuse)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 15:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("signature", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("signing_key_id", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_column("signing_key_id")
        batch.drop_column("signature")
