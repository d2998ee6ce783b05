"""5.4 priority messages and 5.5 Lite Mode on the broker side (as Java's ``broker/lite``), beside processors/.

- ``config``: the settings (``LiteConfig``, ``PriorityConfig``) under the Java names;
- ``wiring``: ``LitePriority``, which builds the parts before POP and installs them after (send hooks,
  remoting codes, the background rounds of ``rounds``); ``parent_topics``: lite topics counted under their parent;
- ``subscriptions``: ``LiteSubscriptionManager``, the lite consumers' subscriptions, events and delivery, made of
  ``registry`` (SyncLiteSubscription, sessions), ``delivery`` (events, pops, re-offers), ``lifecycle`` (quiet
  clients, expired lite topics) and ``views`` (what admin, console and metrics read) over ``model``;
- ``remoting``: the lite remoting codes (pop, subscription control, admin queries);
- ``priority_send``, ``priority_selector``: a priority message's queue on send, the priority order of a POP.

The endpoints keep their adapters (:mod:`rmqd.grpc.lite`, :mod:`rmqd.proxy.lite`); the console reads the broker's
``lite_priority`` handle (:mod:`rmqd.console.lite_pages`). This package uses pop/, store/ and processors/ and is
imported by none of them.
"""
