"""`python -m server` is the `claimcheck` command."""

from server.launch import main

raise SystemExit(main())
