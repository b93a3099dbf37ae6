"""The chat formats under :mod:`kimi_recon.render`: the dispatch by ``ChatProfile.format``, the K2.x turn, Kimi-K3's
XTML turn and prompt, and the K2.5 prompt in plain Python.

Rendering layer: above the parser (:mod:`kimi_recon.responses`) and the segments (:mod:`kimi_recon.segments`),
below comparison and the one-turn rebuild. The map of the layers: docs/architecture.md."""
