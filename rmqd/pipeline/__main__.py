"""``python -m rmqd.pipeline <job> ...``; also the script to give ``spark-submit``:

    spark-submit --master yarn --py-files rmqd-0.1.0-cp311-cp311-linux_x86_64.whl \
        "$(python3 -c 'import rmqd.pipeline.__main__ as m; print(m.__file__)')" archive --store ... --out ...
"""
import sys

from rmqd.pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
