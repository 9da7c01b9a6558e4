"""Package list for setuptools; everything else is in pyproject.toml.

The canonical prompt set lives in the repository's top-level ``prompts/`` folder (where a
person editing prompts looks for it) and ships inside the wheel as the data package
``sam3_agent._prompts``. A mapped package cannot be combined with ``packages.find`` in
pyproject.toml, so the list is computed here: every ``sam3_agent`` subpackage is found
automatically, and the mapping is added to it.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["sam3_agent", "sam3_agent.*"]), "sam3_agent._prompts"],
    package_dir={"sam3_agent._prompts": "prompts"},
)
