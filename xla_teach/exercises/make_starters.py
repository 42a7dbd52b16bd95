"""Check (default) or regenerate the starter files in ``notebooks/exercises/`` from the solutions.

    python -m xla_teach.exercises.make_starters           # exit code 1 if a starter is out of date
    python -m xla_teach.exercises.make_starters --write   # rewrite the out-of-date ones

See :mod:`xla_teach.exercises.starters` for how a starter is made.
"""

from __future__ import annotations

import argparse
import sys

from xla_teach.exercises import EXERCISE_NAMES
from xla_teach.exercises.starters import STARTERS_DIR, starter_file, starter_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="check (default) or regenerate the exercise starter files")
    parser.add_argument("--write", action="store_true", help=f"write the starters into {STARTERS_DIR}")
    args = parser.parse_args(argv)
    stale = []
    for name in EXERCISE_NAMES:
        path, want = starter_file(name), starter_text(name)
        if path.exists() and path.read_text() == want:
            continue
        stale.append(path)
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(want)
            print(f"wrote {path}")
    if stale and not args.write:
        print("out of date (run with --write):\n" + "\n".join(f"  {p}" for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
