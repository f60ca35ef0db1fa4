"""`python -m jacrl ...` = `jacrl ...`."""

import sys

from jacrl.cli import main

if __name__ == "__main__":  # importing it (the docs' reference check does) runs nothing
    sys.exit(main())
