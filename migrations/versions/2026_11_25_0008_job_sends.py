"""tune jobs remember their messages: tune_jobs.sent_at (when the last message naming the job went to the
broker) and tune_jobs.sends (how many have), so a queued job whose message was lost is sent again, with a
growing pause, and never more than one is presumed outstanding; rows from before count as sent once at
their creation

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 15:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tune_jobs") as batch:
        batch.add_column(sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("sends", sa.Integer(), nullable=False, server_default="1"))
    op.execute("UPDATE tune_jobs SET sent_at = created_at")


def downgrade() -> None:
    with op.batch_alter_table("tune_jobs") as batch:
        batch.drop_column("sends")
        batch.drop_column("sent_at")
