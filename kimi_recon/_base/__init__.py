"""The floor under every layer: argument checks, the file edges, terminal escaping, short reprs, the two upward
references the package root wires, and what both command lines share.

Nothing here imports a module of the package but :mod:`kimi_recon.errors` (and each other), so every layer above
may use it. The map of the layers: docs/architecture.md."""
