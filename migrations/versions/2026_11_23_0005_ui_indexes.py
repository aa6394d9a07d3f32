"""indexes for the web page's listings: kernels newest first, tuning results most recently improved first
(of all targets or one), kernels built for a target, results with a trial on a GPU model

Each page is then a walk along an index that stops after one page (plus its offset), not a sort of the
whole table; the filter choices (targets, GPU models) are seeks along the leading column. Downgrade drops them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 16:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ("ix_kernels_created_at_key_name", "kernels", ["created_at", "key", "name"]),
    ("ix_artifacts_target_kernel_key", "artifacts", ["target", "kernel_key"]),
    ("ix_tuning_results_updated_at_tuning_key", "tuning_results", ["updated_at", "tuning_key", "kernel_key"]),
    (
        "ix_tuning_results_target_updated_at",
        "tuning_results",
        ["target", "updated_at", "tuning_key", "kernel_key"],
    ),
    ("ix_trials_gpu_model_tuning_key", "trials", ["gpu_model", "tuning_key"]),
)


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns, unique=False)


def downgrade() -> None:
    for name, table, _columns in reversed(INDEXES):
        op.drop_index(name, table_name=table)
