"""Hand-written programs the tests run as processes: `python -m tests.support.servers.<name>` from the repository
(`processes.program`, `processes.program_entry`)."""
