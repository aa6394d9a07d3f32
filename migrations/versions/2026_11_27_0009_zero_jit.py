"""zero compiles in production (issue 27): misses (launches that found no build and would compile or tune,
counted per specialisation), tuning_pins (a team's config for a tuning key), tuning_history (each tune's
best by GPU model and compiler version), server_facts (the compiler version and GPU models seen), and
tuning_results.decision (how the best was declared)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("tuning_results") as batch:
        batch.add_column(sa.Column("decision", sa.JSON(), nullable=True))
    op.create_table(
        "tuning_pins",
        sa.Column("tuning_key", sa.String(length=64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("pinned_by", sa.Integer(), nullable=True),
        sa.Column("pinned_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(["tuning_key"], ["tuning_results.tuning_key"], ondelete="CASCADE",
                                name="fk_tuning_pins_tuning_key_tuning_results"),
        sa.PrimaryKeyConstraint("tuning_key", name="pk_tuning_pins"),
    )
    op.create_table(
        "tuning_history",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tuning_key", sa.String(length=64), nullable=False),
        sa.Column("gpu_model", sa.String(length=200), nullable=True),
        sa.Column("compiler_version", sa.String(length=64), nullable=False),
        sa.Column("best_time_ms", sa.Float(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("recorded_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(["tuning_key"], ["tuning_results.tuning_key"], ondelete="CASCADE",
                                name="fk_tuning_history_tuning_key_tuning_results"),
        sa.PrimaryKeyConstraint("id", name="pk_tuning_history"),
    )
    op.create_index("ix_tuning_history_tuning_key_recorded_at", "tuning_history", ["tuning_key", "recorded_at"])
    op.create_table(
        "misses",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("miss_key", sa.String(length=64), nullable=False),
        sa.Column("kernel_key", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("what", sa.String(length=8), nullable=False),
        sa.Column("target", sa.String(length=32), nullable=False),
        sa.Column("specialisation", sa.JSON(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("launch", sa.JSON(), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_seen", TZ, nullable=False),
        sa.Column("last_seen", TZ, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_misses"),
        sa.UniqueConstraint("miss_key", name="uq_misses_miss_key"),
    )
    op.create_index("ix_misses_kernel_key", "misses", ["kernel_key"])
    op.create_index("ix_misses_last_seen", "misses", ["last_seen"])
    op.create_table(
        "server_facts",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_server_facts"),
    )


def downgrade() -> None:
    op.drop_table("server_facts")
    op.drop_index("ix_misses_last_seen", table_name="misses")
    op.drop_index("ix_misses_kernel_key", table_name="misses")
    op.drop_table("misses")
    op.drop_index("ix_tuning_history_tuning_key_recorded_at", table_name="tuning_history")
    op.drop_table("tuning_history")
    op.drop_table("tuning_pins")
    with op.batch_alter_table("tuning_results") as batch:
        batch.drop_column("decision")
