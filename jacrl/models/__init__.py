"""The models: which model a name means, the one loader, and how a model gets here (an import
from GGUF, or the jac-tiny build) and is checked before hours of work (docs/real-model.md).

- `chat_template.py`: a model's chat template rendered under a time bound.
- `registry.py`: a model by registry name or directory (`resolve`); the one loader (`load`).
- `gguf_header.py`, `gguf.py`, `gguf_import.py`: a GGUF file checked, converted to an mlx-lm
  directory, and imported into models/NAME (`jacrl models import`).
- `hf_index.py`: transformers' index of its model files, kept on disk (installed by
  `import jacrl`).
- `tiny_model/`: the offline jac-tiny build (`jacrl tiny-model`).
- `check.py`: a model's tokenizer and config against the stages (`jacrl models check`).
"""
