"""Broker registration and topic routes over a real socket (README §3.1, §6.13)."""
import asyncio
import json
import struct
import zlib
from pathlib import Path

from rmqd.namesrv.route_data import DataVersion, RegisterBrokerBody, TopicConfig
from rmqd.namesrv.server import NameServer
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import FrameReader, new_request
from rmqd.remoting.fastjson import dumps, loads_lenient

from tests.namesrv.conftest import make_config, register_request, route_request

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cpp_frames"

ROUTE_OLD = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",'
             b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
             b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
ROUTE_STANDARD = ROUTE_OLD.replace(b'{0:"127', b'{"0":"127')


async def register(client, namesrv, **kw):
    resp = await client.invoke(namesrv.address, register_request(**kw))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp


async def route(client, namesrv, topic, **kw):
    return await client.invoke(namesrv.address, route_request(topic, **kw))


async def test_route_old_style_and_standard_bodies(namesrv, client):
    await register(client, namesrv, topics={"TopicTest": (4, 4, 6)})
    old = await route(client, namesrv, "TopicTest", version=333)
    assert old.code == ResponseCode.SUCCESS and old.body_bytes() == ROUTE_OLD
    new = await route(client, namesrv, "TopicTest", version=401)
    assert new.body_bytes() == ROUTE_STANDARD
    asked = await route(client, namesrv, "TopicTest", version=317, standard=True)
    assert asked.body_bytes() == ROUTE_STANDARD
    declined = await route(client, namesrv, "TopicTest", version=317, standard=False)
    assert declined.body_bytes() == ROUTE_OLD


async def test_route_topic_not_exist(namesrv, client):
    resp = await route(client, namesrv, "Nope")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == ("No topic route info in name server for the topic: Nope\n"
                           "See http://rocketmq.apache.org/docs/faq/ for further details.")
    assert not resp.body_bytes()
    five = await route(client, namesrv, "Nope", version=412)          # a 5.x client: 5.x's FAQ link
    assert five.remark == ("No topic route info in name server for the topic: Nope\n"
                           "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")


async def _fixture_frame_sent(namesrv, client, fixture: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """TopicTest registered, then a client's captured GET_ROUTEINFO_BY_TOPIC frame (tests/fixtures) sent on a
    connection of its own; the caller closes the writer."""
    await register(client, namesrv, topics={"TopicTest": (4, 4, 6)})
    reader, writer = await asyncio.open_connection("127.0.0.1", namesrv.server.port)
    writer.write((FIXTURES / fixture).read_bytes())
    return reader, writer


async def test_cpp_client_frame_gets_a_route_it_can_parse(namesrv, client):
    reader, writer = await _fixture_frame_sent(namesrv, client, "001_105_get_routeinfo_by_topic.bin")
    try:
        (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 3))
        rest = await asyncio.wait_for(reader.readexactly(length), 3)
    finally:
        writer.close()
    (header_word,) = struct.unpack(">i", rest[:4])
    assert header_word >> 24 == 0  # JSON, the C++ client does not mask the type byte
    header = json.loads(rest[4:4 + (header_word & 0xFFFFFF)])
    assert header["code"] == 0 and header["flag"] & 1 and header["opaque"] == 0
    assert all(isinstance(v, str) for v in (header.get("extFields") or {}).values())
    body = rest[4 + (header_word & 0xFFFFFF):]
    assert body == ROUTE_OLD  # version 63 < 401: unquoted keys, which C++ reads with allowNumericKeys
    assert loads_lenient(body)["brokerDatas"][0]["brokerAddrs"] == {0: "127.0.0.1:10911"}


async def test_cpp2_frame_same_answer(namesrv, client):
    reader, writer = await _fixture_frame_sent(namesrv, client, "019_105_cpp2_get_routeinfo_by_topic.bin")
    try:
        frames = FrameReader()
        got = []
        while not got:
            got = frames.feed(await asyncio.wait_for(reader.read(65536), 3))
    finally:
        writer.close()
    assert got[0].code == 0 and got[0].body_bytes() == ROUTE_OLD


async def test_two_brokers_one_cluster_and_two_clusters(namesrv, client):
    await register(client, namesrv, broker_name="broker-b", addr="127.0.0.1:20911", topics={"T": (2, 2, 6)})
    await register(client, namesrv, broker_name="broker-a", addr="127.0.0.1:10911", topics={"T": (4, 4, 6)})
    await register(client, namesrv, broker_name="broker-c", addr="127.0.0.1:30911", cluster="Other",
                   topics={"T": (1, 1, 6), "U": (1, 1, 6)})
    data = loads_lenient((await route(client, namesrv, "T", version=333)).body_bytes())
    assert [q["brokerName"] for q in data["queueDatas"]] == ["broker-a", "broker-b", "broker-c"]
    assert [b["brokerName"] for b in data["brokerDatas"]] == ["broker-a", "broker-b", "broker-c"]
    assert data["brokerDatas"][2]["cluster"] == "Other"

    info = await client.invoke(namesrv.address, new_request(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert info.code == ResponseCode.SUCCESS
    assert info.body_bytes() == (
        b'{"brokerAddrTable":{'
        b'"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"},'
        b'"broker-b":{"brokerAddrs":{0:"127.0.0.1:20911"},"brokerName":"broker-b","cluster":"DefaultCluster"},'
        b'"broker-c":{"brokerAddrs":{0:"127.0.0.1:30911"},"brokerName":"broker-c","cluster":"Other"}},'
        b'"clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"],"Other":["broker-c"]}}')

    by_cluster = await client.invoke(namesrv.address, new_request(RequestCode.GET_TOPICS_BY_CLUSTER,
                                                                  {"cluster": "DefaultCluster"}))
    assert by_cluster.body_bytes() == b'{"topicList":["T"]}'
    other = await client.invoke(namesrv.address, new_request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"}))
    assert other.body_bytes() == b'{"topicList":["T","U"]}'
    all_topics = await client.invoke(namesrv.address, new_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert all_topics.body_bytes() == b'{"topicList":["T","U"]}'
    system = await client.invoke(namesrv.address, new_request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))
    assert loads_lenient(system.body_bytes()) == {
        "brokerAddr": "127.0.0.1:10911",
        "topicList": ["DefaultCluster", "Other", "broker-a", "broker-b", "broker-c"]}


async def test_master_slave_ids_and_switch(namesrv, client):
    master, slave = "127.0.0.1:10911", "127.0.0.1:10921"
    first = await register(client, namesrv, addr=master, topics={"T": (4, 4, 6)}, ha="127.0.0.1:10912")
    assert not first.ext_fields or "masterAddr" not in first.ext_fields
    resp = await register(client, namesrv, addr=slave, broker_id=1, topics={"T": (8, 8, 6), "SlaveOnly": (1, 1, 6)},
                          ha="127.0.0.1:10922")
    assert resp.ext_fields["masterAddr"] == master and resp.ext_fields["haServerAddr"] == "127.0.0.1:10912"
    data = loads_lenient((await route(client, namesrv, "T", version=333)).body_bytes())
    assert data["brokerDatas"][0]["brokerAddrs"] == {0: master, 1: slave}
    assert data["queueDatas"][0]["readQueueNums"] == 4  # slave registrations never touch queue data
    assert (await route(client, namesrv, "SlaveOnly")).code == ResponseCode.TOPIC_NOT_EXIST

    # The slave is promoted: same address now registers as id 0 (the old id-1 entry goes away).
    await register(client, namesrv, addr=slave, broker_id=0, topics={"T": (8, 8, 6)}, version=(2, 1))
    data = loads_lenient((await route(client, namesrv, "T", version=333)).body_bytes())
    assert data["brokerDatas"][0]["brokerAddrs"] == {0: slave}
    assert data["queueDatas"][0]["readQueueNums"] == 8


async def test_reregistration_updates_topics_only_on_new_data_version(namesrv, client):
    await register(client, namesrv, topics={"T": (4, 4, 6)}, version=(1, 100))
    await register(client, namesrv, topics={"T": (4, 4, 6), "New": (2, 2, 6)}, version=(1, 100))
    assert (await route(client, namesrv, "New")).code == ResponseCode.TOPIC_NOT_EXIST
    await register(client, namesrv, topics={"T": (4, 4, 6), "New": (2, 2, 6)}, version=(2, 100))
    assert (await route(client, namesrv, "New")).code == ResponseCode.SUCCESS


async def test_query_data_version(namesrv, client):
    await register(client, namesrv, topics={"T": (4, 4, 6)}, version=(3, 100))
    ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster", "brokerId": "0"}
    same = await client.invoke(namesrv.address, new_request(RequestCode.QUERY_DATA_VERSION, ext,
                                                            dumps(DataVersion(100, 3))))
    assert same.code == ResponseCode.SUCCESS and same.ext_fields["changed"] == "false"
    assert same.body_bytes() == b'{"counter":3,"timestamp":100}'
    other = await client.invoke(namesrv.address, new_request(RequestCode.QUERY_DATA_VERSION, ext,
                                                             dumps(DataVersion(100, 4))))
    assert other.ext_fields["changed"] == "true"
    unknown = dict(ext, brokerAddr="127.0.0.1:1")
    resp = await client.invoke(namesrv.address, new_request(RequestCode.QUERY_DATA_VERSION, unknown,
                                                            dumps(DataVersion(100, 3))))
    assert resp.ext_fields["changed"] == "true" and not resp.body_bytes()


async def test_broker_expiry_with_shrunken_timeout(tmp_path):
    config = make_config(tmp_path, brokerExpiredMillis=300, scanNotActiveBrokerInterval=50)
    namesrv = NameServer(config)
    await namesrv.start()
    client = RemotingClient()
    keeper = RemotingClient()
    try:
        await register(client, namesrv, topics={"T": (4, 4, 6), "Shared": (4, 4, 6)})
        await register(keeper, namesrv, broker_name="broker-b", addr="127.0.0.1:20911", topics={"Shared": (2, 2, 6)})
        conn = await client.connection(namesrv.address)
        for _ in range(20):  # keep broker-b alive while broker-a expires
            await asyncio.sleep(0.05)
            await register(keeper, namesrv, broker_name="broker-b", addr="127.0.0.1:20911",
                           topics={"Shared": (2, 2, 6)})
            if "127.0.0.1:10911" not in namesrv.route_info.brokerLiveTable:
                break
        assert (await route(keeper, namesrv, "T")).code == ResponseCode.TOPIC_NOT_EXIST
        shared = loads_lenient((await route(keeper, namesrv, "Shared", version=333)).body_bytes())
        assert [q["brokerName"] for q in shared["queueDatas"]] == ["broker-b"]
        assert "broker-a" not in namesrv.route_info.brokerAddrTable
        await asyncio.sleep(0.05)
        assert conn.closed  # the name server closed the expired broker's channel
    finally:
        client.close()
        keeper.close()
        await namesrv.close()


async def test_broker_dropped_on_channel_close(namesrv, client):
    broker = RemotingClient()
    await register(broker, namesrv, topics={"Mine": (4, 4, 6), "Shared": (4, 4, 6)})
    await register(client, namesrv, broker_name="broker-b", addr="127.0.0.1:20911", topics={"Shared": (2, 2, 6)})
    broker.close()
    for _ in range(100):
        if "broker-a" not in namesrv.route_info.brokerAddrTable:
            break
        await asyncio.sleep(0.01)
    assert (await route(client, namesrv, "Mine")).code == ResponseCode.TOPIC_NOT_EXIST
    shared = loads_lenient((await route(client, namesrv, "Shared", version=333)).body_bytes())
    assert [b["brokerName"] for b in shared["brokerDatas"]] == ["broker-b"]
    info = loads_lenient((await client.invoke(namesrv.address,
                                              new_request(RequestCode.GET_BROKER_CLUSTER_INFO))).body_bytes())
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-b"]}


async def test_unregister_broker(namesrv, client):
    await register(client, namesrv, topics={"T": (4, 4, 6)})
    resp = await client.invoke(namesrv.address, new_request(RequestCode.UNREGISTER_BROKER, {
        "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster", "brokerId": "0"}))
    assert resp.code == ResponseCode.SUCCESS
    assert (await route(client, namesrv, "T")).code == ResponseCode.TOPIC_NOT_EXIST
    assert namesrv.route_info.clusterAddrTable == {}


async def test_compressed_register_body(namesrv, client):
    await register(client, namesrv, topics={"Z": (3, 5, 6), "Y": (1, 1, 4)}, compressed=True)
    data = loads_lenient((await route(client, namesrv, "Z", version=333)).body_bytes())
    assert data["queueDatas"][0]["readQueueNums"] == 3 and data["queueDatas"][0]["writeQueueNums"] == 5
    assert (await route(client, namesrv, "Y")).code == ResponseCode.SUCCESS


def test_compressed_body_layout():
    body = RegisterBrokerBody(DataVersion(7, 2), {"T": TopicConfig("T", 4, 4, 6)}, []).encode(compressed=True)
    raw = zlib.decompress(body)
    dv = b'{"counter":2,"timestamp":7}'
    tc = b"T 4 4 6 SINGLE_TAG"
    assert raw == (struct.pack(">i", len(dv)) + dv + struct.pack(">i", 1) + struct.pack(">i", len(tc)) + tc
                   + struct.pack(">i", 2) + b"[]")
    back = RegisterBrokerBody.decode(body, compressed=True)
    assert back.data_version == DataVersion(7, 2) and back.topic_configs["T"].write_queue_nums == 4


async def test_crc32_check(namesrv, client):
    good = register_request(topics={"T": (4, 4, 6)})
    good.ext_fields["bodyCrc32"] = str(zlib.crc32(good.body_bytes()) & 0x7FFFFFFF)
    assert (await client.invoke(namesrv.address, good)).code == ResponseCode.SUCCESS
    bad = register_request(topics={"T": (4, 4, 6)}, crc=12345)
    resp = await client.invoke(namesrv.address, bad)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "crc32 not match"


async def test_old_broker_sends_bare_wrapper(namesrv, client):
    wrapper = {"dataVersion": DataVersion(1, 1), "topicConfigTable": {"Old": TopicConfig("Old", 2, 2, 6)}}
    req = new_request(RequestCode.REGISTER_BROKER, {
        "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C", "haServerAddr": "h",
        "brokerId": "0"}, dumps(wrapper))
    req.version = 30
    assert (await client.invoke(namesrv.address, req)).code == ResponseCode.SUCCESS
    assert (await route(client, namesrv, "Old")).code == ResponseCode.SUCCESS


async def test_register_without_body_and_missing_header(namesrv, client):
    req = register_request()
    req.body = None
    assert (await client.invoke(namesrv.address, req)).code == ResponseCode.SUCCESS
    assert "broker-a" in namesrv.route_info.brokerAddrTable
    missing = new_request(RequestCode.REGISTER_BROKER, {"brokerName": "x"})
    resp = await client.invoke(namesrv.address, missing)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerAddr" in resp.remark


async def test_delete_topic_whole_and_by_cluster(namesrv, client):
    await register(client, namesrv, topics={"T": (4, 4, 6), "K": (1, 1, 6)})
    await register(client, namesrv, broker_name="broker-c", addr="127.0.0.1:30911", cluster="Other",
                   topics={"T": (1, 1, 6)})
    resp = await client.invoke(namesrv.address, new_request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                                            {"topic": "T", "clusterName": "Other"}))
    assert resp.code == ResponseCode.SUCCESS
    data = loads_lenient((await route(client, namesrv, "T", version=333)).body_bytes())
    assert [q["brokerName"] for q in data["queueDatas"]] == ["broker-a"]
    await client.invoke(namesrv.address, new_request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                                     {"topic": "T", "clusterName": "DefaultCluster"}))
    assert (await route(client, namesrv, "T")).code == ResponseCode.TOPIC_NOT_EXIST
    await client.invoke(namesrv.address, new_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "K"}))
    assert (await route(client, namesrv, "K")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_wipe_and_add_write_perm(namesrv, client):
    await register(client, namesrv, topics={"A": (4, 4, 6), "B": (4, 4, 7), "C": (4, 4, 4)})
    await register(client, namesrv, broker_name="broker-b", addr="127.0.0.1:20911", topics={"A": (4, 4, 6)})
    wipe = await client.invoke(namesrv.address, new_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                                            {"brokerName": "broker-a"}))
    assert wipe.code == ResponseCode.SUCCESS and wipe.ext_fields["wipeTopicCount"] == "3"
    perms = {t: {q["brokerName"]: q["perm"] for q in loads_lenient(
        (await route(client, namesrv, t, version=333)).body_bytes())["queueDatas"]} for t in "ABC"}
    assert perms == {"A": {"broker-a": 4, "broker-b": 6}, "B": {"broker-a": 5}, "C": {"broker-a": 4}}
    add = await client.invoke(namesrv.address, new_request(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                                           {"brokerName": "broker-a"}))
    assert add.ext_fields["addTopicCount"] == "3"
    b = loads_lenient((await route(client, namesrv, "B", version=333)).body_bytes())
    assert b["queueDatas"][0]["perm"] == 6
    none = await client.invoke(namesrv.address, new_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                                            {"brokerName": "nobody"}))
    assert none.ext_fields["wipeTopicCount"] == "0"


async def test_unit_topic_lists(namesrv, client):
    await register(client, namesrv, topics={"Plain": (1, 1, 6, 0), "Unit": (1, 1, 6, 1), "UnitSub": (1, 1, 6, 2),
                                            "Both": (1, 1, 6, 3)})

    async def topics(code):
        resp = await client.invoke(namesrv.address, new_request(code))
        assert resp.code == ResponseCode.SUCCESS
        return loads_lenient(resp.body_bytes())["topicList"]

    assert await topics(RequestCode.GET_UNIT_TOPIC_LIST) == ["Both", "Unit"]
    assert await topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == ["Both", "UnitSub"]
    assert await topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST) == ["UnitSub"]


async def test_register_topic_in_namesrv(namesrv, client):
    await register(client, namesrv, topics={"T": (4, 4, 6)})
    body = dumps({"queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0,
                                  "writeQueueNums": 2},
                                 {"brokerName": "unknown", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0,
                                  "writeQueueNums": 2}]})
    resp = await client.invoke(namesrv.address, new_request(RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                                                            {"topic": "Static"}, body))
    assert resp.code == ResponseCode.SUCCESS
    data = loads_lenient((await route(client, namesrv, "Static", version=333)).body_bytes())
    assert [q["brokerName"] for q in data["queueDatas"]] == ["broker-a"]


async def test_a_master_of_an_older_epoch_does_not_take_the_route_back(namesrv, client):
    """5.x controller mode (#6316): brokers register their master epoch as the DataVersion's stateVersion; while the
    master of a newer epoch is live, one of an older epoch registering as brokerId 0 (a Java 5.x master cut off
    from the controller, or one just resumed) is not routed; a newer or equal epoch takes brokerId 0, and without
    stateVersion (4.x) the newcomer always does."""
    topics = {"TopicTest": (4, 4, 6)}

    async def master():
        body = loads_lenient((await route(client, namesrv, "TopicTest")).body_bytes())
        return body["brokerDatas"][0]["brokerAddrs"]["0"]
    await register(client, namesrv, addr="127.0.0.1:20911", topics=topics, state_version=3)
    await register(client, namesrv, addr="127.0.0.1:30911", topics=topics, state_version=2)
    assert await master() == "127.0.0.1:20911"
    await register(client, namesrv, addr="127.0.0.1:30911", topics=topics, state_version=4)
    assert await master() == "127.0.0.1:30911"
    await register(client, namesrv, addr="127.0.0.1:20911", topics=topics, state_version=4)
    assert await master() == "127.0.0.1:20911"
    await register(client, namesrv, addr="127.0.0.1:40911", topics=topics)
    assert await master() == "127.0.0.1:40911"


async def test_a_slave_is_told_the_master_the_controller_knows(namesrv, client):
    """With a controller in the name server's process, a registering slave is told the master that controller
    knows, once it has registered (none before), not the old master still on record as brokerId 0 (a Java slave
    would point its HA client at it and never rejoin the SyncStateSet); without one, the one on record, as Java."""
    topics = {"TopicTest": (4, 4, 6)}
    await register(client, namesrv, addr="127.0.0.1:20911", ha="127.0.0.1:20912", topics=topics, state_version=3)
    java_like = await register(client, namesrv, addr="127.0.0.1:30911", broker_id=2, state_version=4)
    assert java_like.ext_fields["masterAddr"] == "127.0.0.1:20911"
    masters = {"broker-a": "127.0.0.1:40911"}
    namesrv.route_info.master_hint = masters.get          # the controller elected 40911, not registered yet
    before = await register(client, namesrv, addr="127.0.0.1:30911", broker_id=2, state_version=4)
    assert not before.ext_fields.get("masterAddr") and not before.ext_fields.get("haServerAddr")
    await register(client, namesrv, addr="127.0.0.1:40911", broker_id=1, ha="127.0.0.1:40912", state_version=3)
    known = await register(client, namesrv, addr="127.0.0.1:30911", broker_id=2, state_version=4)
    assert (known.ext_fields["masterAddr"], known.ext_fields["haServerAddr"]) == ("127.0.0.1:40911", "127.0.0.1:40912")
    other = await register(client, namesrv, addr="127.0.0.1:50911", broker_name="broker-b", broker_id=1)
    assert not other.ext_fields.get("masterAddr")          # a group the controller does not know: as before
