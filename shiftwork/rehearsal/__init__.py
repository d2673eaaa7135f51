"""A rehearsal of a full configuration (``config/paper.yaml``) on a CPU: every external part of it
is replaced by a small stand-in of the same kind, generated from the configuration itself.

* hub models: tiny randomly initialised models of the same architecture class, with a tokenizer
  built offline and a chat template where the configuration registers a chat model
  (:mod:`shiftwork.rehearsal.models`), written into a Hugging Face cache under their hub ids;
* hub data sets: a few rows in the real columns and splits (:mod:`shiftwork.rehearsal.datasets`),
  written into the ``datasets`` cache that ``load_dataset`` reads when the hub is offline;
* API models: a local vLLM OpenAI-compatible server (:mod:`shiftwork.rehearsal.server`);
* the configuration: the same rules, engines, LoRA targets and trainer settings on smaller grids
  (:mod:`shiftwork.rehearsal.config`).

``python -m shiftwork.rehearsal --help`` (docs/running.md, The rehearsal).
"""
