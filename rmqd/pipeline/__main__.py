"""``python -m rmqd.pipeline <job> ...``; also a driver script to give ``spark-submit``:

    python -m rmqd.spark.pyfiles -o dist      # dist/rmqd-<version>-cp311-linux_x86_64.zip, dist/rmqd_pipeline.py
    spark-submit --master spark://host:7077 --py-files dist/rmqd-0.1.0-cp311-linux_x86_64.zip \\
        dist/rmqd_pipeline.py archive --store ... --out ...

(``dist/rmqd_pipeline.py`` is this file's equivalent for hosts without a checkout; docs/spark-cluster.md.)
"""
import sys

from rmqd.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
