"""The grep worker process: `python -I -S _worker.py FD [DIR]`, FD being its end of a Unix socket to the parent,
DIR the directory google-re2 is installed in.

It runs without site-packages, so `fs_sandbox/__init__.py` (which imports anyio) must not run here: the
package is set up as a bare namespace over this directory, and only its stdlib-only modules are imported.
"""

import os
import socket
import sys
import types


def main() -> None:
    package = types.ModuleType("fs_sandbox")
    package.__path__ = [os.path.dirname(os.path.abspath(__file__))]
    sys.modules["fs_sandbox"] = package
    if len(sys.argv) > 2:  # where google-re2 is installed (the worker runs without site-packages)
        sys.path.append(sys.argv[2])
    from fs_sandbox._scan import serve  # only once the bare package is in place

    serve(socket.socket(fileno=int(sys.argv[1])))


if __name__ == "__main__":
    main()
