"""The ruler: how a completion for a hole is judged (docs/ruler.md). Below the task data, which
uses it to validate every driver's gold.

- `jacsyntax.py`: a lexical view of Jac (code vs strings and comments, braces, unit headers); the
  one idiom list.
- `drivers.py`: the driver format: a hole's markers, the unit that holds them, the gold body.
- `extract.py`: completion -> body -> spliced program.
- `reward.py`: the reward formulas; runs the spliced program with `jacrl.executor`.
- `variants.py`: answer shapes built from a gold body (correct ones, mutants, notebook 20's set).
"""
