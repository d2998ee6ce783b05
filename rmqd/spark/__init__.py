"""The PySpark connector: ``spark.read.format("rocketmq")`` / ``readStream`` / ``write`` / ``writeStream``.

Everything here runs with rmqd's own remoting client (no JVM-side RocketMQ client); install with
``pip install 'rmqd[spark]'``. The ``pyspark_rmqd`` top-level module exposes the data source as
``DefaultSource`` so Spark registers it under ``rocketmq`` by itself.
"""
