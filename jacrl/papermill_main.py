"""`python -m jacrl.papermill_main` = papermill's own command line (what a ladder cell runs), minus
jsonschema's IRI checker: importing `rfc3987_syntax` (which jsonschema picks up when installed)
builds three Earley parsers, 1.1 s of CPU in every cell's papermill process. nbformat's schemas
check no string format, so the import is made to fail, which jsonschema skips. (`make setup` does
not install it at all; this keeps a pip-installed jacrl's cells fast too.)"""

import sys

if __name__ == "__main__":
    sys.modules.setdefault("rfc3987_syntax", None)  # an import of it now raises ImportError
    from papermill.cli import papermill

    papermill(prog_name="papermill")
