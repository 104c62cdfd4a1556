"""What more than one test module needs, in one layer: in-memory proxies (`proxies`, `handles`), real processes
(`processes`: the one way to start a process and wait for what it announces), wire clients (`wire`), peers and OS
packages, the shared fixtures (`fixtures`) and the programs the tests run as processes (`servers/`)."""
