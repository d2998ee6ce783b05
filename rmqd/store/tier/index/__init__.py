"""The tier's random index: :mod:`.layout` (byte layouts, the indexing rule, a pure builder),
:mod:`.store_file` (one file through writing -> compacted -> uploaded) and :mod:`.service`
(the files by time, background compaction/upload, queries)."""
