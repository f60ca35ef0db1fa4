"""`python -m jacrl.papermill_main` = papermill's own command line (what a ladder cell runs), minus
imports this process never uses, 0.3-1.4 s of CPU in every cell's papermill process, made to fail
(each is an optional import whose absence its importer handles):
- jsonschema's string-format checkers (nbformat's schemas check no string format). The worst,
  `rfc3987_syntax`, builds three Earley parsers (1.1 s); `make setup` does not install it at all,
  this keeps a pip-installed jacrl's cells fast too. isoduration brings arrow and dateutil.
- pyarrow, which papermill imports only for hdfs:// paths (a cell's notebooks are local files).

A cell's outputs may also arrive late: papermill fails a cell whose last output messages reach
it more than nbclient's `iopub_timeout` (4 s) after the cell's reply (papermill 2.0 made that
wait an error). On 2 cores under load that is not a lost output but a slow one: a 23-minute SFT
cell of the SmolLM2 ladder (load 4-5) failed that way after it had trained. `patient_outputs`
gives that wait `IOPUB_TIMEOUT` seconds, and a wait past it stays the error it is."""

import sys

IOPUB_TIMEOUT = 120  # seconds papermill waits for a finished cell's last outputs

UNUSED = (
    "rfc3987_syntax",
    "rfc3986_validator",
    "rfc3339_validator",
    "isoduration",
    "webcolors",
    "uri_template",
    "pyarrow",
)


def patient_outputs(seconds: float = IOPUB_TIMEOUT) -> None:
    """Papermill's notebook client waits `seconds` (not nbclient's 4) for a finished cell's last
    output messages; papermill's CLI has no option for it. Called once, by this entry point."""
    from papermill import clientwrap

    init = clientwrap.PapermillNotebookClient.__init__

    def patient_init(self, nb_man, km=None, **kw):
        kw.setdefault("iopub_timeout", seconds)
        init(self, nb_man, km=km, **kw)

    clientwrap.PapermillNotebookClient.__init__ = patient_init


if __name__ == "__main__":
    for name in UNUSED:
        sys.modules.setdefault(name, None)  # an import of it now raises ImportError
    patient_outputs()
    from papermill.cli import papermill

    papermill(prog_name="papermill")
