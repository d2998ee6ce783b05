"""ClusterView: everything the console pages read and do, against a whole cluster.

``RemoteClusterView`` speaks the remoting protocol through ``rmqd.admin.client.AdminClient`` (one
client per executor thread), so it works with rmqd and the Java broker alike.  Every method is
blocking and bounded (page sizes, message limits, scan caps); the HTTP layer runs them in a small
executor, never on the event loop.  ``LocalClusterView`` overrides the table reads in-process.

One module a job: ``view_base`` (ClusterView, ViewError, the pages' JSON shapes), ``remote_cluster`` (the
transport and the cluster's layout), ``remote_brokers``, ``remote_topics``, ``remote_groups`` and
``remote_messages`` (the page families).
"""
from __future__ import annotations

from rmqd.console.remote_brokers import RemoteBrokers
from rmqd.console.remote_groups import RemoteGroups
from rmqd.console.remote_messages import RemoteMessages
from rmqd.console.remote_topics import RemoteTopics
from rmqd.console.view_base import ClusterView, ViewError, jsonable, message_json, page_of, topic_kind

__all__ = ["ClusterView", "RemoteClusterView", "ViewError", "jsonable", "message_json", "page_of", "topic_kind"]


class RemoteClusterView(RemoteBrokers, RemoteTopics, RemoteGroups, RemoteMessages):
    """A cluster seen through its name servers and brokers' remoting admin codes."""

    mode = "remote"
