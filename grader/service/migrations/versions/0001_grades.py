"""The first schema: grades, results by grading key, regrade requests, callbacks.

Revision ID: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "grades",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("key", sa.String(64), nullable=False, index=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("exercise", sa.String(200), nullable=False),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("callback_url", sa.Text),
        sa.Column("job", sa.String(200)),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("result", sa.Text),
        sa.Column("upload", sa.LargeBinary),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("updated", sa.Float, nullable=False))
    op.create_index("grades_by_owner_and_update", "grades", ["owner", "updated", "id"])
    op.create_table(
        "results",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False))
    op.create_table(
        "regrade_requests",
        sa.Column("number", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("grade_id", sa.String(64), nullable=False, index=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("score", sa.Float),
        sa.Column("max_score", sa.Float, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False))
    op.create_table(
        "callbacks",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("grade_id", sa.String(64), nullable=False, index=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("updated", sa.Float, nullable=False))


def downgrade() -> None:
    for table in ("callbacks", "regrade_requests", "results", "grades"):
        op.drop_table(table)
