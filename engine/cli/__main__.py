"""``python -m engine.cli``: the ``cortex`` command."""

import sys

from engine.cli import main

sys.exit(main())
