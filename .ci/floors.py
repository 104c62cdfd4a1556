"""Exit 1 unless each direct dependency of pyproject.toml is installed at exactly its declared floor."""

import sys
import tomllib
from importlib.metadata import version

from packaging.requirements import Requirement
from packaging.version import Version

with open("pyproject.toml", "rb") as file:
    declared = [Requirement(line) for line in tomllib.load(file)["project"]["dependencies"]]
wrong = []
for requirement in declared:
    floors = [Version(spec.version) for spec in requirement.specifier if spec.operator in (">=", "~=", "==")]
    installed = Version(version(requirement.name))
    if floors and installed != max(floors):
        wrong.append(f"{requirement.name}: declared {requirement.specifier}, the lowest that installs is {installed}")
    print(f"{requirement.name}=={installed}")
if wrong:
    sys.exit("floors that do not install as declared:\n  " + "\n  ".join(wrong))
