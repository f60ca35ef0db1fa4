"""`python -m jacrl ...` = `jacrl ...`."""

import sys

from jacrl.cli import main

sys.exit(main())
