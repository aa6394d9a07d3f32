"""each text form of an artifact (tir, llir, ptx) carries its own sha256

The columns are added nullable, filled for existing rows from the stored text (its UTF-8 bytes, as the
service hashes it), then made NOT NULL. What is stored at upgrade time is taken as good: a text that was
corrupted before 0003 cannot be told apart. Downgrade drops the columns.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 00:03:00
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FORMS = ("tir", "llir", "ptx")
BATCH = 200  # rows per round trip on SQLite: texts can be megabytes


def _fill_postgresql(artifacts: sa.TableClause) -> None:
    # one statement, hashed where the texts are (sha256() is in PostgreSQL 11 and later)
    values = {
        f"{form}_sha256": sa.func.encode(sa.func.sha256(sa.func.convert_to(artifacts.c[form], "UTF8")), "hex")
        for form in FORMS
    }
    op.execute(artifacts.update().values(**values))


def _fill_sqlite(artifacts: sa.TableClause) -> None:
    # the raw stored bytes (CAST AS BLOB): a text that is not valid UTF-8 is hashed as it is, not refused
    conn = op.get_bind()
    raw = [sa.cast(artifacts.c[form], sa.LargeBinary) for form in FORMS]
    update = (
        artifacts.update()
        .where(artifacts.c.key == sa.bindparam("row_key"))
        .values({f"{form}_sha256": sa.bindparam(f"new_{form}") for form in FORMS})
    )
    last = ""
    while True:
        rows = conn.execute(
            sa.select(artifacts.c.key, *raw)
            .where(artifacts.c.key > last)
            .order_by(artifacts.c.key)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        params = [
            {
                "row_key": row[0],
                **{
                    f"new_{form}": hashlib.sha256(row[i + 1] or b"").hexdigest()
                    for i, form in enumerate(FORMS)
                },
            }
            for row in rows
        ]
        conn.execute(update, params)
        last = rows[-1][0]


def upgrade() -> None:
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        for form in FORMS:
            batch_op.add_column(sa.Column(f"{form}_sha256", sa.String(length=64), nullable=True))
    artifacts = sa.table(
        "artifacts",
        sa.column("key", sa.String),
        *(sa.column(f, sa.Text) for f in FORMS),
        *(sa.column(f"{f}_sha256", sa.String) for f in FORMS),
    )
    if op.get_bind().dialect.name == "postgresql":
        _fill_postgresql(artifacts)
    else:
        _fill_sqlite(artifacts)
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        for form in FORMS:
            batch_op.alter_column(f"{form}_sha256", existing_type=sa.String(length=64), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("artifacts", schema=None) as batch_op:
        for form in reversed(FORMS):
            batch_op.drop_column(f"{form}_sha256")
