"""Command line: rmqd serve | namesrv | broker | controller | proxy | console | admin | pipeline.

Heavy modules are imported only by the sub-command that needs them, so `rmqd admin` does not
load the broker and the servers do not load the admin tool.
"""
from __future__ import annotations

import argparse
import os
import sys

from typing import TYPE_CHECKING

from rmqd.config import BrokerConfig, NamesrvConfig

if TYPE_CHECKING:
    from rmqd.namesrv.server import NameServer
    from rmqd.runtime.services import Part, Services


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
    if getattr(args, "tier_dir", None):
        # rmqd's shortcut: the tiered store on the Posix backend in DIR (broker.conf keys otherwise)
        config.messageStorePlugIn = "org.apache.rocketmq.tieredstore.TieredMessageStore"
        if "Memory" in str(config.tieredBackendServiceProvider) or config.tieredBackendServiceProvider == "memory":
            config.tieredBackendServiceProvider = "org.apache.rocketmq.tieredstore.provider.PosixFileSegment"
        config.tieredStoreFilePath = os.path.abspath(os.path.expanduser(args.tier_dir))
    if getattr(args, "acl", None):
        config.aclEnable = True
        config.aclFile = os.path.abspath(os.path.expanduser(args.acl))
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
    p.add_argument("--tier-dir", metavar="DIR",
                   help="tiered storage on local disk in DIR (messageStorePlugIn=TieredMessageStore, "
                        "PosixFileSegment, tieredStoreFilePath=DIR)")
    p.add_argument("--acl", metavar="FILE", help="turn ACL on with this plain_acl.yml (aclEnable=true, aclFile=FILE)")
    p.add_argument("--grpc-port", type=int, default=None,
                   help="gRPC port for RocketMQ 5 clients (default grpcServerPort, 8081; 0 = off). serve --brokers N "
                        "/ --replicas: the other broker processes serve theirs on the next ports (8082, ...)")
    p.add_argument("--grpc-optional", action="store_true", help=argparse.SUPPRESS)   # serve's children: a taken
    # port is a warning, as serve's own default port
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus /metrics on this port (same as metricsExporterType=PROM + "
                        "metricsPromExporterPort; 0 = any free port). serve: on by default at "
                        "metricsPromExporterPort (default 5557)")
    p.add_argument("--no-metrics", action="store_true",
                   help="serve: no /metrics endpoint (unless broker.conf says metricsExporterType=PROM)")


def _add_console_options(p: argparse.ArgumentParser, default_port: int | None) -> None:
    p.add_argument("--console-port", type=int, default=default_port,
                   help="web console port (serve: default 8080, 0 = off; broker: off unless given, "
                        "0 = any free port)")
    p.add_argument("--console-host", default="127.0.0.1",
                   help="web console bind address (default 127.0.0.1; any other address needs the token)")
    p.add_argument("--read-only", action="store_true", help="the console refuses every change (403)")
    p.add_argument("--console-token", default=os.environ.get("RMQD_CONSOLE_TOKEN"),
                   help="token the console asks for when not bound to loopback (default: a random one, printed)")


def _add_log_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    """--log-level and --log-dir, before the sub-command (defaults) or after it (only when given)."""
    level = os.environ.get("RMQD_LOG_LEVEL", "INFO") if defaults else argparse.SUPPRESS
    p.add_argument("--log-level", default=level,
                   help="DEBUG, INFO (default; $RMQD_LOG_LEVEL), WARNING, ERROR. Per-topic and per-route "
                        "records are DEBUG")
    p.add_argument("--log-dir", metavar="DIR", default=os.environ.get("RMQD_LOG_DIR") if defaults
                   else argparse.SUPPRESS,
                   help="write the log to a file in DIR (as the Java broker's ~/logs/rocketmqlogs: rmqd.log "
                        "for serve, namesrv.log, <brokerName>.log for broker; rolled at 128 MiB, 10 kept), "
                        "warnings also to stderr; default: stderr only ($RMQD_LOG_DIR)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rmqd", description="RocketMQ-compatible name server and broker")
    _add_log_options(parser, defaults=True)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="name server + broker in one process")
    serve.add_argument("--namesrv-port", type=int, default=None, help="name server port (default 9876)")
    serve.add_argument("--namesrv-config", help="namesrv properties file")
    serve.add_argument("--brokers", type=int, default=1, metavar="N",
                       help="run N broker processes (broker-a, broker-b, ...; ports listenPort+10*i, stores "
                            "<store-dir>/<brokerName>) registered with this name server (default 1)")
    serve.add_argument("--replicas", type=int, default=1, metavar="N",
                       help="N brokers per group: a master and N-1 slave processes (brokerRole=SLAVE, brokerId "
                            "1..N-1, stores <store-dir>/<brokerName>-s<id>); see docs/replication.md (default 1)")
    serve.add_argument("--failover", action="store_true",
                       help="with --replicas N: automatic failover (RocketMQ 5 controller mode): three controller "
                            "processes and N broker processes per group, each its own process, the controllers "
                            "choosing the master; see docs/controller.md")
    _add_broker_options(serve)
    _add_console_options(serve, None)
    _add_log_options(serve, defaults=False)

    ns = sub.add_parser("namesrv", help="name server only")
    ns.add_argument("--port", "--namesrv-port", dest="namesrv_port", type=int, default=None)
    ns.add_argument("-c", "--config", dest="namesrv_config", help="namesrv properties file")
    _add_log_options(ns, defaults=False)

    ctl = sub.add_parser("controller", help="a RocketMQ 5 controller (automatic master failover; bin/mqcontroller)")
    ctl.add_argument("-c", "--config", dest="controller_config", help="controller.conf (controllerDLegerPeers, ...)")
    ctl.add_argument("-p", "--printConfigItem", action="store_true", help="print all config items and exit")

    broker = sub.add_parser("broker", help="broker only, registering with name servers")
    broker.add_argument("-n", "--namesrv-addr", help="name server address(es), 'host:port;host:port'")
    _add_broker_options(broker)
    _add_console_options(broker, None)
    _add_log_options(broker, defaults=False)
    proxy = sub.add_parser("proxy", help="a stateless gRPC front for RocketMQ 5 clients over brokers anywhere, rmqd "
                                         "or Java (the 5.x proxy's cluster mode, mqproxy -pm cluster)")
    proxy.add_argument("-n", "--namesrv-addr", help="name server address(es), 'host:port;host:port'")
    proxy.add_argument("-c", "--config", help="rmq-proxy.json (Java's proxy configuration) or a properties file: "
                                              "the proxy's keys and the TLS keys")
    proxy.add_argument("--grpc-port", type=int, default=8081, help="gRPC port (default 8081; 0 = any free port)")
    proxy.add_argument("--host", default="0.0.0.0", help="bind address (default 0.0.0.0)")
    proxy.add_argument("--tls-mode", choices=["permissive", "enforcing", "disabled"],
                       help="TLS on the gRPC port (default tls.server.mode, permissive: TLS and plaintext on one port)")
    _add_log_options(proxy, defaults=False)
    console = sub.add_parser("console", help="the web console alone, for any RocketMQ-compatible cluster")
    console.add_argument("-n", "--namesrv-addr", required=True, help="name server address(es), 'host:port;host:port'")
    console.add_argument("--port", dest="console_port", type=int, default=8080, help="port (default 8080; 0 = any free port)")
    console.add_argument("--host", dest="console_host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    console.add_argument("--read-only", action="store_true", help="refuse every change (403)")
    console.add_argument("--token", dest="console_token", default=os.environ.get("RMQD_CONSOLE_TOKEN"),
                         help="token required when not bound to loopback (default: a random one, printed)")
    _add_log_options(console, defaults=False)
    metrics = sub.add_parser("metrics", help="metrics helpers: `rmqd metrics grafana > rmqd.json`")
    metrics.add_argument("what", choices=["grafana", "names"],
                         help="grafana: the Grafana dashboard JSON; names: the exported metric families")
    admin = sub.add_parser("admin", help="mqadmin sub-commands, in Python (no JVM); `rmqd admin -h` lists them",
                           add_help=False)
    admin.add_argument("admin_args", nargs=argparse.REMAINDER)
    pipeline = sub.add_parser("pipeline", help="the store's offline jobs on Spark: archive, compact, index, query "
                                               "(`rmqd pipeline -h`)", add_help=False)
    pipeline.add_argument("pipeline_args", nargs=argparse.REMAINDER)
    return parser


def _serve_services(args: argparse.Namespace) -> Services:
    """Name server + broker in this process, plus the other broker processes of ``--brokers N``."""
    from rmqd.runtime.services import Services
    from rmqd.broker.controller import BrokerController
    from rmqd.namesrv.server import NameServer

    config = _broker_config(args)
    endpoints: list[Part] = []
    if getattr(args, "failover", False):
        from rmqd.runtime.broker_processes import broker_names
        from rmqd.runtime.failover_processes import FailoverProcesses

        ns_config = _namesrv_config(args, args.namesrv_port)
        _inherit_tls(ns_config, config)
        grpc_port, grpc_optional = _grpc_port(args, config)
        group = FailoverProcesses(broker_names(config.brokerName, args.brokers),
                                  os.path.abspath(args.config) if args.config else None, config.storePathRootDir,
                                  int(config.listenPort), args.log_level, replicas=max(1, args.replicas),
                                  namesrv_port=int(ns_config.listenPort),
                                  extra_args=["--log-dir", args.log_dir] if args.log_dir else [],
                                  grpc_port=grpc_port, grpc_optional=grpc_optional)
        return Services(NameServer(ns_config), group)
    if args.brokers > 1 or args.replicas > 1:
        from rmqd.runtime.broker_processes import ExtraBrokers, broker_names, store_dir_of

        names = broker_names(config.brokerName, args.brokers)
        grpc_port, grpc_optional = _grpc_port(args, config)
        root = config.storePathRootDir
        config.brokerName = names[0]
        config.storePathRootDir = store_dir_of(root, names[0])
        endpoints.append(ExtraBrokers(names[1:], os.path.abspath(args.config) if args.config else None, root,
                                      int(config.listenPort), args.log_level, _explicit_metrics_port(args, config),
                                      (["--acl", config.aclFile] if args.acl else [])
                                      + (["--tier-dir", config.tieredStoreFilePath] if args.tier_dir else [])
                                      + (["--log-dir", args.log_dir] if args.log_dir else []),
                                      replicas=args.replicas, first_name=names[0],
                                      grpc_port=grpc_port, grpc_optional=grpc_optional))
    ns_config = _namesrv_config(args, args.namesrv_port)
    _inherit_tls(ns_config, config)
    namesrv = NameServer(ns_config)
    return Services(namesrv, BrokerController(config), *_embedded_controller(ns_config, args.namesrv_config, namesrv),
                    *endpoints)


def _inherit_tls(ns_config: NamesrvConfig, config: BrokerConfig) -> None:
    """serve: broker.conf's TLS keys are the name server's too (one process, as Java's system properties are one
    JVM's), unless the name server's own file sets them."""
    from rmqd.tls.settings import tls_keys_of
    own = tls_keys_of(ns_config.extra)
    ns_config.update({**tls_keys_of(config.extra), **own}, source="broker.conf (TLS)")


def _embedded_controller(ns_config: NamesrvConfig, path: str | None, namesrv: NameServer) -> list[Part]:
    """The controller of ``enableControllerInNamesrv=true`` (keys from the same file), as an endpoint; the name
    server tells registering slaves the master this controller knows."""
    if not ns_config.enableControllerInNamesrv:
        return []
    from rmqd.controller.config import ControllerConfigError
    from rmqd.controller.server import embedded_controller
    try:
        server = embedded_controller(ns_config, path)
        if server is None:
            return []
        namesrv.route_info.master_hint = server.controller.state.master_address_of
        from rmqd.metrics.controller_metrics import controller_metrics_endpoint
        return [server, *controller_metrics_endpoint(server)]
    except ControllerConfigError as exc:
        raise SystemExit(f"rmqd: enableControllerInNamesrv: {exc}") from None


def _controller_main(args: argparse.Namespace) -> int:
    """`rmqd controller -c controller.conf`: one controller node in this process (Java's ControllerStartup)."""
    from rmqd.runtime.services import Services, run
    from rmqd.controller.config import ControllerConfig, ControllerConfigError
    from rmqd.controller.server import ControllerServer

    config = ControllerConfig()
    if args.controller_config:
        config.load_file(args.controller_config)
    if args.printConfigItem:
        sys.stdout.write(config.to_properties_text())
        return 0
    try:
        server = ControllerServer(config)
    except ControllerConfigError as exc:
        print(f"rmqd controller: {exc}", file=sys.stderr)
        return 2
    from rmqd.metrics.controller_metrics import controller_metrics_endpoint
    return run(lambda: Services(server, *controller_metrics_endpoint(server)))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["admin"]:
        # The admin tool has its own parser (mqadmin's sub-commands and options).
        from rmqd.admin.main import main as admin_main
        return admin_main(argv[1:])
    if argv[:1] == ["pipeline"]:
        # Spark jobs with their own parser (rmqd.pipeline.cli); pyspark comes with the spark extra.
        from rmqd.pipeline.cli import main as pipeline_main
        return pipeline_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "metrics":
        return _metrics_main(args.what)
    from rmqd.runtime import logsetup
    try:
        log_file = logsetup.setup(args.log_level, args.log_dir, _log_file_name(args))
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    from rmqd.common import progress
    progress.set_reporter(progress.Reporter())      # a bar when stderr is a terminal, log lines otherwise
    from rmqd.runtime.services import Services, run
    from rmqd.broker.controller import BrokerController
    from rmqd.namesrv.server import NameServer

    footer = [f"rmqd logs: {log_file}" if log_file else "rmqd logs: stderr (--log-dir DIR for files)",
              f"rmqd stop: Ctrl-C, or kill {os.getpid()}"]
    if args.command == "serve":
        if args.brokers < 1:
            print("rmqd: --brokers must be at least 1", file=sys.stderr)
            return 2
        if args.replicas < 1:
            print("rmqd: --replicas must be at least 1", file=sys.stderr)
            return 2
        return run(lambda: _with_endpoints(_serve_services(args), args), footer)
    if args.command == "namesrv":
        ns_config = _namesrv_config(args, args.namesrv_port)
        def namesrv_services() -> Services:
            namesrv = NameServer(ns_config)
            return Services(namesrv, *_embedded_controller(ns_config, args.namesrv_config, namesrv))
        return run(namesrv_services, footer)
    if args.command == "controller":
        return _controller_main(args)
    if args.command == "broker":
        return run(lambda: _with_endpoints(Services(BrokerController(_broker_config(args))), args), footer)
    if args.command == "console":
        return run(lambda: _with_endpoints(Services(), args, namesrv_addr=args.namesrv_addr), footer)
    if args.command == "proxy":
        from rmqd.proxy.app import proxy_config, proxy_endpoint
        try:
            config = proxy_config(args.config, args.namesrv_addr)
        except (OSError, ValueError) as exc:
            parser.error(str(exc))
        return run(lambda: Services(proxy_endpoint(config, args.host, args.grpc_port, args.tls_mode)), footer)
    return 2


def _log_file_name(args: argparse.Namespace) -> str:
    """The file a --log-dir gets: rmqd.log for serve, namesrv.log, <brokerName>.log, console.log."""
    if args.command == "broker":
        return f"{args.broker_name or BrokerConfig().brokerName}.log"
    return {"serve": "rmqd.log"}.get(args.command, f"{args.command}.log")


def _metrics_main(what: str) -> int:
    if what == "grafana":
        from rmqd.metrics.grafana import dashboard_json
        sys.stdout.write(dashboard_json())
    else:
        from rmqd.metrics.families import SPECS
        for spec in SPECS:
            print(f"{spec.name} {spec.kind} {','.join(spec.labels)}")
    return 0


def _with_endpoints(services: Services, args: argparse.Namespace, namesrv_addr: str | None = None) -> Services:
    """Add the metrics and console endpoints the options and broker.conf ask for."""
    broker = services.broker
    if broker is not None:
        c = broker.config
        port = _explicit_metrics_port(args, c)
        optional = False
        if port is None and args.command == "serve" and not getattr(args, "no_metrics", False):
            # serve: on by default at metricsPromExporterPort (5557), skipped with a note when it is taken
            port, optional = int(c.metricsPromExporterPort), True
        if port is not None and _have_aiohttp("metrics"):
            from rmqd.metrics.endpoint import MetricsEndpoint
            host = c.metricsPromExporterHost or c.brokerIP1 or "127.0.0.1"
            services.add(MetricsEndpoint(host, port, optional=optional))
        _add_grpc_endpoint(services, args, c)
    port = args.console_port
    optional = False
    if args.command == "serve":
        # serve: on by default at 8080 (skipped with a warning when that port is taken); 0 = off
        optional = port is None
        port = 8080 if port is None else (port or None)
    if port is not None and _have_aiohttp("console"):
        from rmqd.console.endpoint import ConsoleEndpoint
        services.add(ConsoleEndpoint(args.console_host, port, read_only=args.read_only,
                                     token=args.console_token, namesrv_addr=namesrv_addr, optional=optional))
    return services


def _add_grpc_endpoint(services: Services, args: argparse.Namespace, config: BrokerConfig) -> None:
    """The 5.x clients' gRPC endpoint: --grpc-port, else grpcServerPort (8081); 0 turns it off.  Without
    the grpc extra, say so and run on."""
    import importlib.util
    port, optional = _grpc_port(args, config)
    if port <= 0:
        return
    try:
        missing = importlib.util.find_spec("grpc") is None or importlib.util.find_spec("google.protobuf") is None
    except ModuleNotFoundError:         # grpcio without protobuf: no ``google`` package at all
        missing = True
    if missing:
        print("rmqd: the gRPC endpoint (RocketMQ 5 clients) needs grpcio and protobuf, which rmqd depends on: "
              "pip install grpcio protobuf (or reinstall rmqd)", file=sys.stderr)
        return
    from rmqd.grpc.endpoint import GrpcEndpoint
    services.add(GrpcEndpoint(config.brokerIP1 or "127.0.0.1", port, optional=optional))


def _grpc_port(args: argparse.Namespace, config: BrokerConfig) -> tuple[int, bool]:
    """(the gRPC port: --grpc-port, else grpcServerPort; whether a taken port is only a warning: when not given,
    or for serve's own children)."""
    given = getattr(args, "grpc_port", None)
    port = given if given is not None else int(config.grpcServerPort)
    return port, given is None or bool(getattr(args, "grpc_optional", False))


def _explicit_metrics_port(args: argparse.Namespace, config: BrokerConfig) -> int | None:
    """--metrics-port, else metricsPromExporterPort when broker.conf says metricsExporterType=PROM."""
    from rmqd.metrics.endpoint import exporter_type
    given: int | None = getattr(args, "metrics_port", None)
    if given is not None:
        return given
    if exporter_type(config.metricsExporterType) == "PROM":
        return int(config.metricsPromExporterPort)
    return None


def _have_aiohttp(what: str) -> bool:
    """Whether aiohttp is installed (found, not imported: the endpoints load it on first use)."""
    import importlib.util
    if importlib.util.find_spec("aiohttp") is None:
        print(f"rmqd: the {what} endpoint needs aiohttp, which rmqd depends on: pip install aiohttp "
              "(or reinstall rmqd)", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
