"""`python -m jacrl.papermill_main` = papermill's own command line (what a ladder cell runs), minus
imports this process never uses, 0.3-1.4 s of CPU in every cell's papermill process, made to fail
(each is an optional import whose absence its importer handles):
- jsonschema's string-format checkers (nbformat's schemas check no string format). The worst,
  `rfc3987_syntax`, builds three Earley parsers (1.1 s); `make setup` does not install it at all,
  this keeps a pip-installed jacrl's cells fast too. isoduration brings arrow and dateutil.
- pyarrow, which papermill imports only for hdfs:// paths (a cell's notebooks are local files)."""

import sys

UNUSED = (
    "rfc3987_syntax",
    "rfc3986_validator",
    "rfc3339_validator",
    "isoduration",
    "webcolors",
    "uri_template",
    "pyarrow",
)

if __name__ == "__main__":
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # an import of it now raises ImportError
    from papermill.cli import papermill

    papermill(prog_name="papermill")
