"""Alembic's entry: runs the revisions on the connection grader.service.migrations.upgrade hands over."""
from alembic import context

context.configure(connection=context.config.attributes["connection"])
with context.begin_transaction():
    context.run_migrations()
