"""Start-up cost without timing: what reading the config and building `rmqd serve` import, checked by module name
in a fresh interpreter (the 0.5 s start goal: scripts/bench_start.py measures the time).

Reading broker.conf (the CLI, `rmqd namesrv`, the admin tool) loads no store, broker, POP, gRPC or HTTP code;
building the default `rmqd serve` (name server, broker, metrics, console, gRPC endpoints) loads neither the
gRPC service and its protobuf modules nor aiohttp (they load with the first call or connection), nor the parts
that only some brokers use (controller mode, the tiered store, the SQL92 compiler); and modules compile no
regular expression at import.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: what `import rmqd.runtime.cli` and building the configs must not load
CONFIG_MUST_NOT_LOAD = (
    "rmqd.runtime.services", "rmqd.broker.controller", "rmqd.namesrv.server", "rmqd.store.message_store", "rmqd.store.commitlog",
    "rmqd.store.compaction.store", "rmqd.store.tier.backend", "rmqd.store.tier.store", "rmqd.pop",
    "rmqd.store.lite", "rmqd.filter.sql92", "rmqd.remoting.fastjson", "rmqd.cython_ext", "grpc", "google.protobuf",
    "aiohttp", "asyncio",
)

#: what building (not starting) the default `rmqd serve` must not load
SERVE_MUST_NOT_LOAD = (
    "rmqd.grpc.service", "rmqd.grpc.pb", "google.protobuf", "aiohttp", "rmqd.console.app", "rmqd.console.view",
    "rmqd.metrics.collector", "rmqd.replicas.controller_mode", "rmqd.store.tier.store", "rmqd.store.tier.backend",
    "rmqd.filter.sql92", "rmqd.store.compaction.adopt", "rmqd.store.compaction.compactor",
    "rmqd.store.compaction.queue_log", "rmqd.admin", "rmqd.controller",
)


def _loaded_in_fresh_python(code: str) -> dict:
    """Run ``code`` in a new interpreter on this tree; it prints a JSON object."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _loaded(names, modules):
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def test_reading_the_config_loads_no_store_broker_or_endpoint_code(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\nenableCompaction=false\nmessageStorePlugIn=\n")
    out = _loaded_in_fresh_python(f"""
import json, sys
import rmqd.runtime.cli
from rmqd.config import BrokerConfig, NamesrvConfig, compaction_config_from
c = BrokerConfig()
c.load_file({str(conf)!r})
NamesrvConfig()
cc = compaction_config_from(c)
print(json.dumps({{"modules": sorted(sys.modules), "name": c.brokerName, "compaction": cc.enabled,
                  "threads": cc.threads}}))
""")
    assert out["name"] == "broker-x" and out["compaction"] is False and out["threads"] >= 1
    assert _loaded(CONFIG_MUST_NOT_LOAD, out["modules"]) == []


def test_building_the_default_serve_defers_grpc_service_http_and_optional_parts(tmp_path):
    out = _loaded_in_fresh_python(f"""
import json, re, sys
from rmqd.runtime import cli
args = cli.build_parser().parse_args(["serve", "--store-dir", {str(tmp_path / "store")!r}, "--namesrv-port", "0",
                                      "--broker-port", "0", "--grpc-port", "0"])
args.grpc_port = 1          # a port number: the endpoint is built (not started, nothing binds)
services = cli._with_endpoints(cli._serve_services(args), args)
kinds = [type(c).__name__ for c in services.components]
modules = sorted(sys.modules)
from rmqd.remoting import fastjson
from rmqd.filter import sql92
lazy = [fastjson._ESCAPE_RES, fastjson._DECODE_RES, sql92._TOKEN_RE, sql92._DOUBLE_RE]
# compiled on first use, and they work
body = [fastjson.loads_lenient(fastjson.dumps({{"a\\n": [1, 2.5, "x\\u2028"]}})), fastjson.loads_lenient("{{k:-3}}")]
tokens = [t.text for t in sql92.tokenize("a > 1.5 AND b = 'x'") if t.type != "eof"]
print(json.dumps({{"modules": modules, "kinds": kinds, "lazy": [x is None for x in lazy],
                  "body": body, "tokens": tokens, "double": sql92.to_double(" 1.5e3d ")}}))
""")
    assert out["kinds"] == ["NameServerComponent", "BrokerComponent", "MetricsEndpoint", "GrpcEndpoint",
                            "ConsoleEndpoint"]
    assert _loaded(SERVE_MUST_NOT_LOAD, out["modules"]) == []
    assert out["lazy"] == [True, True, True, True]
    assert out["body"] == [{"a\n": [1, 2.5, "x\u2028"]}, {"k": -3}]
    assert out["tokens"] == ["a", ">", "1.5", "AND", "b", "=", "'x'"]
    assert out["double"] == 1500.0
