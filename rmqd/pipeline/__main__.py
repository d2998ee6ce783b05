"""``python -m rmqd.pipeline <job> ...``; also the script to give ``spark-submit``:

    spark-submit --master yarn --py-files rmqd-0.1.0-cp311.zip rmqd/pipeline/__main__.py archive --store ... --out ...

(``rmqd-0.1.0-cp311.zip``: the wheel, ``pip wheel --no-deps .``, copied to a ``.zip`` name; README "Pipeline".)
"""
import sys

from rmqd.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
