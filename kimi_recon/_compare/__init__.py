"""The parts of :func:`kimi_recon.compare.compare_ids`: the checks on one id list, the segmentation of an id list,
the alignment of two, the rule that names a difference, its evidence and the result type.

Comparison layer: above rendering, below the one-turn rebuild (which checks its ids with :mod:`.ids`). The map of
the layers: docs/architecture.md."""
