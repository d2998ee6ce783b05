"""``rmqd pipeline``: the store's offline data work as Spark jobs (local by default, any cluster at scale).

- :mod:`rmqd.pipeline.archive`: sealed CommitLog segments -> zstd Parquet (topic/queueId/day) + key index,
  incremental and idempotent.
- :mod:`rmqd.pipeline.compact`: a compaction topic compacted by the broker's rule, sharded by key digest,
  written in the broker's compaction-log format for adoption (:mod:`rmqd.store.compaction.adopt`).
- :mod:`rmqd.pipeline.index`: the tier's random-index files for its un-indexed history, byte for byte the
  broker's, adopted by the broker (:mod:`rmqd.store.tier.index.adopt`).
- :mod:`rmqd.pipeline.query`: key / msgId / time lookups in an archive.

The job runner (:mod:`rmqd.pipeline.runner`) makes the SparkSession (``--master``, ``--conf``), shows
progress from Spark's status tracker and prints the summary; :mod:`rmqd.pipeline.cli` is the command line.
"""
