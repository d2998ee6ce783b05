"""KV config (100/101/102/219), its persistence, ORDER_TOPIC_CONFIG use, and namesrv config (318/319)."""
import json
import time

from rmqd.namesrv.kvconfig import KVConfigManager
from rmqd.namesrv.server import NameServer
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.remoting.fastjson import loads_lenient

from tests.namesrv.conftest import make_config, register_request, route_request


async def call(client, namesrv, code, ext=None, body=None):
    return await client.invoke(namesrv.address, new_request(code, ext, body))


async def test_kv_put_get_delete_list(namesrv, client):
    missing = await call(client, namesrv, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: ns Key: k"
    no_ns = await call(client, namesrv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert no_ns.code == ResponseCode.QUERY_NOT_FOUND and no_ns.remark == "No config item, Namespace: ns"

    for key, value in (("k", "v1"), ("k", "v2"), ("j", "w")):
        put = await call(client, namesrv, RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": key, "value": value})
        assert put.code == ResponseCode.SUCCESS
    got = await call(client, namesrv, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert got.code == ResponseCode.SUCCESS and got.ext_fields == {"value": "v2"}
    listed = await call(client, namesrv, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert listed.body_bytes() == b'{"table":{"j":"w","k":"v2"}}'

    deleted = await call(client, namesrv, RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert deleted.code == ResponseCode.SUCCESS
    again = await call(client, namesrv, RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert again.code == ResponseCode.SUCCESS
    gone = await call(client, namesrv, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert gone.code == ResponseCode.QUERY_NOT_FOUND
    with open(namesrv.config.kvConfigPath) as f:
        assert f.read() == '{"configTable":{"ns":{"j":"w"}}}'

    missing_header = await call(client, namesrv, RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert missing_header.code == ResponseCode.SYSTEM_ERROR and "value" in missing_header.remark


async def test_kv_survives_restart(tmp_path):
    config = make_config(tmp_path)
    first = NameServer(config)
    await first.start()
    client = RemotingClient()
    try:
        await call(client, first, RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T",
                                                              "value": "broker-a:4"})
        await call(client, first, RequestCode.PUT_KV_CONFIG, {"namespace": "other", "key": "x", "value": "é"})
    finally:
        client.close()
        await first.close()
    assert json.loads((tmp_path / "namesrv" / "kvConfig.json").read_text("utf-8")) == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}, "other": {"x": "é"}}}

    second = NameServer(make_config(tmp_path))
    await second.start()
    client = RemotingClient()
    try:
        got = await call(client, second, RequestCode.GET_KV_CONFIG, {"namespace": "other", "key": "x"})
        assert got.code == ResponseCode.SUCCESS and got.ext_fields["value"] == "é"
        # REGISTER_BROKER answers with the ORDER_TOPIC_CONFIG namespace as a KVTable
        reg = await client.invoke(second.address, register_request(topics={"T": (4, 4, 6)}))
        assert reg.body_bytes() == b'{"table":{"T":"broker-a:4"}}'
        # orderTopicConf only when orderMessageEnable
        plain = loads_lenient((await client.invoke(second.address, route_request("T", version=333))).body_bytes())
        assert "orderTopicConf" not in plain
        second.config.orderMessageEnable = True
        ordered = await client.invoke(second.address, route_request("T", version=333))
        assert b'"orderTopicConf":"broker-a:4"' in ordered.body_bytes()
        assert loads_lenient(ordered.body_bytes())["orderTopicConf"] == "broker-a:4"
    finally:
        client.close()
        await second.close()


async def test_register_broker_without_order_namespace_has_no_body(namesrv, client):
    resp = await client.invoke(namesrv.address, register_request(topics={"T": (4, 4, 6)}))
    assert resp.code == ResponseCode.SUCCESS and not resp.body_bytes()


def test_kv_load_tolerates_fastjson_and_corrupt_files(tmp_path):
    path = tmp_path / "kv.json"
    path.write_text('{"configTable":{"ns":{"k":"v"}}}\n')
    manager = KVConfigManager(str(path))
    manager.load()
    assert manager.get("ns", "k") == "v"
    path.write_text("{not json")
    broken = KVConfigManager(str(path))
    broken.load()  # logged, starts empty
    assert broken.configTable == {}


def test_kv_sync_persist_is_atomic_and_fast(tmp_path):
    manager = KVConfigManager(str(tmp_path / "deep" / "kv.json"))
    manager.put("ns", "k", "v")
    start = time.perf_counter()
    manager.persist_sync()
    elapsed = time.perf_counter() - start
    assert (tmp_path / "deep" / "kv.json").read_bytes() == b'{"configTable":{"ns":{"k":"v"}}}'
    assert not (tmp_path / "deep" / "kv.json.tmp").exists()
    assert elapsed < 5  # fsync-bound; the server does this on the KV writer thread, never the loop


async def test_get_and_update_namesrv_config(namesrv, client):
    got = await call(client, namesrv, RequestCode.GET_NAMESRV_CONFIG)
    assert got.code == ResponseCode.SUCCESS
    text = got.body_bytes().decode()
    assert "orderMessageEnable=false\n" in text and f"listenPort={namesrv.server.port}\n" in text

    upd = await call(client, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG, None,
                     b"orderMessageEnable=true\nbrokerExpiredMillis=5000\n")
    assert upd.code == ResponseCode.SUCCESS
    assert namesrv.config.orderMessageEnable is True
    assert namesrv.route_info.broker_expired_millis == 5000
    text = (await call(client, namesrv, RequestCode.GET_NAMESRV_CONFIG)).body_bytes().decode()
    assert "orderMessageEnable=true\n" in text

    blocked = await call(client, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG, None, b"kvConfigPath=/etc/passwd\n")
    assert blocked.code == ResponseCode.NO_PERMISSION and blocked.remark == "Can not update config in black list."
    assert namesrv.config.kvConfigPath != "/etc/passwd"


async def test_unknown_code_not_supported(namesrv, client):
    resp = await call(client, namesrv, RequestCode.SEND_MESSAGE)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
