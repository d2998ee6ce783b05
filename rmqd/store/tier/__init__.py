"""Tiered storage (RocketMQ 5.x ``tieredstore``, seed 003): per-queue flat CommitLog and
ConsumeQueue plus the random index in a second tier (Posix, S3-compatible or memory backend).

Modules: :mod:`.store` (the layer), :mod:`.dispatcher` (the copier), :mod:`.fallthrough` (which
reads go to the tier), :mod:`.queue` / :mod:`.flatfile` (flat files), :mod:`.backend` /
:mod:`.s3` (backends), :mod:`.metadata` (committed state), :mod:`.index` (the random index).
"""
