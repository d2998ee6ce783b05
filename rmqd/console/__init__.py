"""The built-in web console (``rmqd serve`` on 127.0.0.1:8080, or ``rmqd console -n NAMESRV``).

- ``view``: ``ClusterView``, what the pages read and do, written once; ``RemoteClusterView`` works
  against any RocketMQ-compatible cluster through rmqd's admin client;
- ``local_view``: ``LocalClusterView`` reads the broker's tables in-process (``rmqd serve``);
- ``jobs``: bounded server-side message search with progress; ``lag_history``: lag trend samples;
- ``app``: the aiohttp application (JSON API, SSE live tail, static single-page UI, security);
- ``endpoint``: joins ``rmqd serve`` as a ``Services`` endpoint, or runs alone.
"""
