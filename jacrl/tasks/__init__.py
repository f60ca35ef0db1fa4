"""The task data: drivers -> data/ (tasks.jsonl, templates/, conversion.jsonl) -> splits
(docs/tasks.md). Reading a task never runs code; building one runs its driver and grades its gold
with the ruler (`jacrl.ruler`).

- `record.py`: the task record as everything downstream reads it (`meta`, `prompt_answer`,
  `read_tasks`, the gold answer).
- `splits.py`: holdout, train pool, valid; the nested rungs.
- `corpus.py`: our own corpus policy, checked apart from the driver format.
- `mining.py`: inventory a .jac tree; draft drivers.
- `validate.py`: drivers -> validated task records + templates.
- `conversion.py`: Python sidecars -> Python->Jac conversion records.
- `build.py`: a drivers folder -> data/, all at once.
- `learnable_shapes.py`, `learnable.py`: the generated learnable sanity family.
"""
