"""A tiny exercise shipped as its own package: `double(x)` returns 2 * x. It exists to show (and
test) that an exercise installed with pip is found through the entry-point group and graded."""
from pathlib import Path

from exercise import Exercise
from sandbox.contract import Entry

EXERCISE = Exercise(
    name="tiny-double",
    version="1",
    title="Double a tensor",
    entry=Entry.a_function("double", ("x",)),
    directory=Path(__file__).parent,
    package=__name__,
)
