"""Packaging beyond what pyproject.toml can say: the exercise starters ride along in the package.

The starters live in ``notebooks/exercises/`` (next to the notebooks that start them, where the
docs and students look for them), outside the package directory. A ``pip install`` of the
package must still be able to ``xla_teach.exercises.start("dce")``, so the build copies them
into ``xla_teach/exercises/starter_files/``, where ``starters.starter_file`` looks when the
repository's folder is not there. They hold no answers (a test keeps it so).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent


class BuildWithStarters(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "xla_teach" / "exercises" / "starter_files"
        target.mkdir(parents=True, exist_ok=True)
        for starter in sorted((HERE / "notebooks" / "exercises").glob("*.py")):
            shutil.copyfile(starter, target / starter.name)


setup(cmdclass={"build_py": BuildWithStarters})
