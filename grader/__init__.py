"""Host side of the autograder: the CLI, reading submissions, scoring reports, rendering results."""
__version__ = "0.1.0"
