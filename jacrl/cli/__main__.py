"""`python -m jacrl.cli ...` = `jacrl ...` (the ladder starts its cells this way)."""

import sys

from jacrl.cli import main

sys.exit(main())
