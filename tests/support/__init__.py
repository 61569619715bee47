"""What the project's tests share: running the grader as its users do (grading, batching,
queueing, serving, as_user), and records and checks their assertions use (records, printable).

Test modules import from here, never from conftest.py or from one another; conftest.py holds only
pytest's fixtures and hooks."""
