"""jacrl: a harness for teaching code LLMs Jac with a verifiable reward (README)."""

from jacrl.models import hf_index

hf_index.install()  # transformers' scan of its model files, kept on disk: 1.3 s less per process
