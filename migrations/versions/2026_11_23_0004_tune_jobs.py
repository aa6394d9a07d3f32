"""tune jobs, and what a trial records of its benchmark (status, confidence interval, repetitions)

Existing trials were timed in full by a client: they become status "ok" with no interval. Downgrade
drops the table and the columns.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIAL_COLUMNS = ("status", "lo_ms", "hi_ms", "reps")


def upgrade() -> None:
    with op.batch_alter_table("trials", schema=None) as batch_op:
        batch_op.add_column(sa.Column("status", sa.String(length=16), server_default="ok", nullable=False))
        batch_op.add_column(sa.Column("lo_ms", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("hi_ms", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("reps", sa.Integer(), nullable=True))
    op.create_table(
        "tune_jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kernel_key", sa.String(length=64), nullable=False),
        sa.Column("tuning_key", sa.String(length=64), nullable=False),
        sa.Column("active_key", sa.String(length=64), nullable=True),
        sa.Column("key_values", sa.String(length=1000), nullable=False),
        sa.Column("dtypes", sa.String(length=1000), nullable=False),
        sa.Column("target", sa.String(length=32), nullable=False),
        sa.Column("strategy", sa.String(length=16), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("trials", sa.JSON(), nullable=False),
        sa.Column("trials_done", sa.Integer(), nullable=False),
        sa.Column("trials_planned", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("best_config", sa.JSON(), nullable=True),
        sa.Column("best_time_ms", sa.Float(), nullable=True),
        sa.Column("submitted_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["kernel_key"], ["kernels.key"], name=op.f("fk_tune_jobs_kernel_key_kernels"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tune_jobs")),
        sa.UniqueConstraint("active_key", name=op.f("uq_tune_jobs_active_key")),
    )
    with op.batch_alter_table("tune_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tune_jobs_kernel_key"), ["kernel_key"], unique=False)
        batch_op.create_index(batch_op.f("ix_tune_jobs_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_tune_jobs_target"), ["target"], unique=False)
        batch_op.create_index(batch_op.f("ix_tune_jobs_tuning_key"), ["tuning_key"], unique=False)


def downgrade() -> None:
    op.drop_table("tune_jobs")
    with op.batch_alter_table("trials", schema=None) as batch_op:
        for column in reversed(TRIAL_COLUMNS):
            batch_op.drop_column(column)
