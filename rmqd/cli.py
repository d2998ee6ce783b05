"""Command line: rmqd serve | namesrv | broker | admin.

Heavy modules are imported only by the sub-command that needs them, so `rmqd admin` does not
load the broker and the servers do not load the admin tool.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from rmqd.config import BrokerConfig, NamesrvConfig


def _broker_config(args: argparse.Namespace) -> BrokerConfig:
    config = BrokerConfig()
    if args.config:
        config.load_file(args.config)
    if args.broker_port is not None:
        config.listenPort = args.broker_port
    if args.store_dir:
        config.storePathRootDir = os.path.abspath(os.path.expanduser(args.store_dir))
    if getattr(args, "namesrv_addr", None):
        config.namesrvAddr = args.namesrv_addr
    if args.broker_name:
        config.brokerName = args.broker_name
    return config


def _namesrv_config(args: argparse.Namespace, port: int | None) -> NamesrvConfig:
    config = NamesrvConfig()
    if getattr(args, "namesrv_config", None):
        config.load_file(args.namesrv_config)
    if port is not None:
        config.listenPort = port
    return config


def _add_broker_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", help="broker.conf in the Java broker's properties format")
    p.add_argument("--broker-port", type=int, help="broker listen port (default 10911; 0 = any free port)")
    p.add_argument("--store-dir", help="store root directory (default ~/.rmqd/store)")
    p.add_argument("--broker-name", help="brokerName (default broker-a)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rmqd", description="RocketMQ-compatible name server and broker")
    parser.add_argument("--log-level", default=os.environ.get("RMQD_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="name server + broker in one process")
    serve.add_argument("--namesrv-port", type=int, default=None, help="name server port (default 9876)")
    serve.add_argument("--namesrv-config", help="namesrv properties file")
    serve.add_argument("--brokers", type=int, default=1, metavar="N",
                       help="run N broker processes (broker-a, broker-b, ...; ports listenPort+10*i, stores "
                            "<store-dir>/<brokerName>) registered with this name server (default 1)")
    _add_broker_options(serve)

    ns = sub.add_parser("namesrv", help="name server only")
    ns.add_argument("--port", "--namesrv-port", dest="namesrv_port", type=int, default=None)
    ns.add_argument("-c", "--config", dest="namesrv_config", help="namesrv properties file")

    broker = sub.add_parser("broker", help="broker only, registering with name servers")
    broker.add_argument("-n", "--namesrv-addr", help="name server address(es), 'host:port;host:port'")
    _add_broker_options(broker)
    admin = sub.add_parser("admin", help="mqadmin sub-commands, in Python (no JVM); `rmqd admin -h` lists them",
                           add_help=False)
    admin.add_argument("admin_args", nargs=argparse.REMAINDER)
    return parser


def _serve_services(args: argparse.Namespace):
    """Name server + broker in this process, plus the other broker processes of ``--brokers N``."""
    from rmqd.app import Services
    from rmqd.broker_controller import BrokerController
    from rmqd.namesrv.server import NameServer

    config = _broker_config(args)
    endpoints = []
    if args.brokers > 1:
        from rmqd.broker_processes import ExtraBrokers, broker_names, store_dir_of

        names = broker_names(config.brokerName, args.brokers)
        root = config.storePathRootDir
        config.brokerName = names[0]
        config.storePathRootDir = store_dir_of(root, names[0])
        endpoints.append(ExtraBrokers(names[1:], os.path.abspath(args.config) if args.config else None, root,
                                      int(config.listenPort), args.log_level))
    return Services(NameServer(_namesrv_config(args, args.namesrv_port)), BrokerController(config),
                    endpoints=endpoints)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["admin"]:
        # The admin tool has its own parser (mqadmin's sub-commands and options).
        from rmqd.admin.main import main as admin_main
        return admin_main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from rmqd.app import Services, run
    from rmqd.broker_controller import BrokerController
    from rmqd.namesrv.server import NameServer

    if args.command == "serve":
        if args.brokers < 1:
            print("rmqd: --brokers must be at least 1", file=sys.stderr)
            return 2
        return run(lambda: _serve_services(args))
    if args.command == "namesrv":
        return run(lambda: Services(namesrv=NameServer(_namesrv_config(args, args.namesrv_port))))
    if args.command == "broker":
        return run(lambda: Services(broker=BrokerController(_broker_config(args))))
    return 2


if __name__ == "__main__":
    sys.exit(main())
