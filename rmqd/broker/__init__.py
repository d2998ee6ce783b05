"""Broker services: what runs beside the request handlers of ``rmqd.processors``.

Delay-level and timer delivery, the transaction check-back, broker statistics, the consumer and
producer tables and long polling (Java's ``broker/schedule``, ``broker/transaction``, ``broker/client``,
``broker/longpolling`` and ``BrokerStatsManager``).  The broker builds each of them with the
collaborators it needs (see ``rmqd.broker.context``); none of them knows ``BrokerController``.
"""
