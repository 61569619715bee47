"""The service database's schema, made and upgraded by Alembic: each revision in versions/ takes the
schema one step on, and `upgrade` runs those a database has not had yet, when the service opens it.
A new column or table is a new revision (`alembic revision` with this folder as script_location),
never an edit of an old one."""
from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa


def upgrade(engine: sa.Engine) -> None:
    """Bring the database behind `engine` to the newest schema (nothing to do when it has it)."""
    from alembic import command
    from alembic.config import Config
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":  # two services starting at once: one migrates, then the other
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(7347112)"))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
