"""Prometheus metrics with the RocketMQ 5.x broker's metric families (``/metrics``).

- ``naming``: the OTel Java 1.29 name mapping (unit suffix, ``_total``) a current 5.x broker exports;
- ``families``: the family table (name, type, unit, label keys) and the exposition writer;
- ``recorders``: counters updated on the hot paths (rpc latency, messages in by type, DLQ);
- ``collector``: everything else read from the broker's tables at scrape time;
- ``endpoint``: the HTTP server (aiohttp) that joins ``rmqd serve`` as a ``Services`` endpoint;
- ``grafana``: the dashboard JSON ``rmqd metrics grafana`` prints.
"""
