"""RocketMQ 4.9 plain ACL (plain_acl.yml): signed requests, accounts, white lists, topic/group permissions.

- :mod:`rmqd.acl.permission`: permission bits and resource-permission strings;
- :mod:`rmqd.acl.address`: white-list address patterns;
- :mod:`rmqd.acl.signer`: the request signature (HmacSHA1 over sorted header values + body);
- :mod:`rmqd.acl.plain_acl`: the YAML files, accounts, hot reload and the admin-code updates;
- :mod:`rmqd.acl.validator`: what a request needs and the checks in the Java broker's order.
"""
from rmqd.acl.permission import AclError

__all__ = ["AclError"]
