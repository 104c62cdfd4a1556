"""Exit 1 unless two wheels hold the same files with the same contents (the sdist builds what the checkout builds)."""

import hashlib
import sys
import zipfile


def contents(path: str) -> dict[str, str]:
    with zipfile.ZipFile(path) as wheel:
        return {name: hashlib.sha256(wheel.read(name)).hexdigest() for name in wheel.namelist()}


first, second = (contents(path) for path in sys.argv[1:3])
differ = sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name))
if differ:
    sys.exit(f"the wheel from the sdist and the wheel from the checkout differ in: {', '.join(differ)}")
print(f"the sdist builds the same wheel as the checkout ({len(first)} files)")
