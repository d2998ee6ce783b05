"""``rmqd admin <sub-command>``: argument parsing (mqadmin's names and options) and dispatch."""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from rmqd.admin import (acl_commands, auth_commands, broker_commands, controller_commands, group_commands,
                        lite_commands, message_commands, offset_commands, storage_commands, topic_commands)
from rmqd.admin.client import AdminClient, AdminError, tools_credentials
from rmqd.admin.options import SpecTable

#: the command table: sub-command -> (handler, help, [(flags, kwargs)...]), each family's part in its module
SPEC: SpecTable = {}
for _family in (topic_commands, group_commands, offset_commands, broker_commands, message_commands, acl_commands,
                storage_commands,
                controller_commands,        # RocketMQ 5 controller mode (-a controller address)
                lite_commands,              # 5.5 lite sub-commands, priority backlog
                auth_commands):             # 5.x access control 2.0: users and ACLs
    SPEC.update(_family.SPEC)


def build_parser(parser: Optional[argparse.ArgumentParser] = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="rmqd admin", description="mqadmin for rmqd (Python)")
    sub = parser.add_subparsers(dest="admin_command", required=True, metavar="<sub-command>")
    for name, (handler, help_, options) in SPEC.items():
        p = sub.add_parser(name, help=help_, add_help=False)
        p.add_argument("-h", "--help", action="help")
        p.add_argument("-n", "--namesrvAddr", help="Name server address list, eg: 192.168.0.1:9876;192.168.0.2:9876")
        for flags, kw in options:
            p.add_argument(*flags, **kw)
        p.set_defaults(admin_handler=handler)
    return parser


def run(args: argparse.Namespace) -> int:
    client = AdminClient(args.namesrvAddr, credentials=tools_credentials())
    try:
        args.admin_handler(client, args)
        return 0
    except AdminError as exc:
        print(f"{args.admin_command} command failed: {exc}", file=sys.stderr)
        return 1
    except (OSError, TimeoutError) as exc:
        print(f"{args.admin_command} command failed: {exc!r}", file=sys.stderr)
        return 1
    finally:
        client.close()


def main(argv: Optional[list[str]] = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
