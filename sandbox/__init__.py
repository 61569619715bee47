"""Where untrusted code runs: the harness, the student worker, their wire protocol, and the backends."""
