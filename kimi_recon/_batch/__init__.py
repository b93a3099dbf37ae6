"""Many records: the thread runner and the process pool, the audit breakdown and its reports, training rows for a
batch or a file, and the bundled audit sample.

Many-records layer: above one record (:mod:`kimi_recon._records`), below the adapters and the command lines. The map
of the layers: docs/architecture.md."""
