"""RocketMQ 5's access control 2.0 (RIP-68): users, policies, and the checks on every request.

- :mod:`rmqd.auth.config`: the settings (``authenticationEnabled``, ``authorizationEnabled``, ...), read from
  broker.conf as 5.x's ``AuthConfig``;
- :mod:`rmqd.auth.model`: users, subjects, resources, actions, policy entries, ACLs and their wire shapes
  (``UserInfo``, ``AclInfo``);
- :mod:`rmqd.auth.source_ip`: the source-IP and CIDR rules of a policy entry;
- :mod:`rmqd.auth.store`: users and ACLs persisted crash-safely in the store's config directory;
- :mod:`rmqd.auth.metadata`: the admin operations with 5.x's checks and messages;
- :mod:`rmqd.auth.authentication` / :mod:`rmqd.auth.authorization`: who signs a request, what it may do;
- :mod:`rmqd.auth.remoting_contexts` / :mod:`rmqd.auth.grpc_contexts`: what a request touches;
- :mod:`rmqd.auth.hook`: the broker's request hook (NO_PERMISSION, as 5.x's pipeline answers);
- :mod:`rmqd.auth.migration`: plain_acl.yml (ACL 1.0) turned into users and ACLs.

The request signature is ACL 1.0's (:mod:`rmqd.acl.signer`), shared.
"""
from rmqd.auth.errors import AuthenticationError, AuthorizationError

__all__ = ["AuthenticationError", "AuthorizationError"]
