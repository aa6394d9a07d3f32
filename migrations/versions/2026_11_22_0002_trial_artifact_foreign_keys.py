"""trials and tuning results reference their artifact by a foreign key

Before 0002 a trial's artifact_key was not checked, so a database may hold keys of artifacts that do
not exist: those are set to NULL first (the trial and its time are kept; only the dangling link goes),
then the foreign keys (ON DELETE SET NULL) and their indexes are added. Downgrade drops them again.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 02:53:36.135021
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ('trials', 'tuning_results')


def _clear_dangling(table: str) -> None:
    rows = sa.table(table, sa.column('artifact_key'))
    artifacts = sa.table('artifacts', sa.column('key'))
    known = sa.select(artifacts.c.key).where(artifacts.c.key == rows.c.artifact_key)
    op.execute(
        rows.update().where(rows.c.artifact_key.is_not(None), ~sa.exists(known)).values(artifact_key=None)
    )


def upgrade() -> None:
    for table in TABLES:
        _clear_dangling(table)
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_index(batch_op.f(f'ix_{table}_artifact_key'), ['artifact_key'], unique=False)
            batch_op.create_foreign_key(
                batch_op.f(f'fk_{table}_artifact_key_artifacts'), 'artifacts', ['artifact_key'], ['key'],
                ondelete='SET NULL',
            )


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(batch_op.f(f'fk_{table}_artifact_key_artifacts'), type_='foreignkey')
            batch_op.drop_index(batch_op.f(f'ix_{table}_artifact_key'))
