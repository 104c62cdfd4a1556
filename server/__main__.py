"""`python -m server` is the `claimcheck` command."""

from server.cli import main

raise SystemExit(main())
