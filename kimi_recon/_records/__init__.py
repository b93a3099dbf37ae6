"""One record of a dataset: the Arrow reader, the record's prompt rendered from its options, and the record itself
(its keys, the JSONL reader, reconstruct and audit of one record).

Records layer: above the one-turn rebuild, below many records (:mod:`kimi_recon._batch`). The map of the layers:
docs/architecture.md."""
