"""Entry points and process wiring: the CLI, the services of one process, child processes."""
