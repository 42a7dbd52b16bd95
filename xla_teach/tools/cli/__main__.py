"""``python -m xla_teach.tools.cli ARGS`` is ``xla-teach ARGS``."""

import sys

from xla_teach.tools.cli import main

sys.exit(main())
