"""rmqd's unit and protocol tests (one package, imported as ``tests.<folder>.<module>``; the shared kit is
:mod:`tests.kit`). Real-client and reference tests are in compat_tests/; docs/testing.md says how to run them."""
