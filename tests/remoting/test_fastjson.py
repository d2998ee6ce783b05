"""fastjson dialect: byte-exact encoding (unquoted int keys, object keys, standard mode) and the
lenient decoder."""
import dataclasses

import pytest

from rmqd.remoting.fastjson import FrozenObject, MessageQueue, dumps, dumps_str, java_double, loads_lenient


def test_bean_keys_sorted_compact():
    assert dumps({"topicName": "T", "perm": 6, "order": False, "readQueueNums": 4}) == \
        b'{"order":false,"perm":6,"readQueueNums":4,"topicName":"T"}'


def test_int_keys_unquoted_and_sorted_numerically():
    body = {"brokerAddrs": {10: "c:3", 1: "b:2", 0: "a:1"}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
    assert dumps(body) == (b'{"brokerAddrs":{0:"a:1",1:"b:2",10:"c:3"},'
                           b'"brokerName":"broker-a","cluster":"DefaultCluster"}')


def test_standard_quotes_int_keys():
    assert dumps({"brokerAddrs": {0: "127.0.0.1:10911", 1: "x:1"}}, standard=True) == \
        b'{"brokerAddrs":{"0":"127.0.0.1:10911","1":"x:1"}}'


def test_message_queue_key_is_a_json_object():
    table = {MessageQueue("t", "b", 1): {"minOffset": 0, "maxOffset": 5},
             MessageQueue("t", "b", 0): {"minOffset": 0, "maxOffset": 3}}
    assert dumps({"offsetTable": table}) == (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"maxOffset":3,"minOffset":0},'
        b'{"brokerName":"b","queueId":1,"topic":"t"}:{"maxOffset":5,"minOffset":0}}}')
    assert dumps({MessageQueue("t", "b", 0): 123}) == b'{{"brokerName":"b","queueId":0,"topic":"t"}:123}'


def test_message_queue_key_standard_is_a_string():
    assert dumps({MessageQueue("t", "b", 0): 1}, standard=True) == \
        b'{"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"t\\"}":1}'


def test_strings_escaping_default_and_standard():
    assert dumps("a\"b\\c\n\t\x01é") == '"a\\"b\\\\c\\n\\t\\u0001é"'.encode("utf-8")
    assert dumps("é\U0001F600", standard=True) == b'"\\u00E9\\uD83D\\uDE00"'


def test_big_longs_standard_as_strings():
    assert dumps({"v": 2 ** 60}) == b'{"v":1152921504606846976}'
    assert dumps({"v": 2 ** 60, "w": 5}, standard=True) == b'{"v":"1152921504606846976","w":5}'


def test_scalars_lists_sets_bytes_floats():
    assert dumps([None, True, False, 0, -1, 1.0, 0.5]) == b'[null,true,false,0,-1,1.0,0.5]'
    assert dumps({"s": {"b", "a"}}) == b'{"s":["a","b"]}'
    assert dumps(b"\x00\x01") == b'"AAE="'
    assert dumps(float("nan")) == b"null"


@pytest.mark.parametrize("value, text", [
    (1.0, "1.0"), (0.001, "0.001"), (1e7, "1.0E7"), (1.5e-5, "1.5E-5"), (123.456, "123.456"),
    (12345678.9, "1.23456789E7"), (-2.5e20, "-2.5E20"), (0.0, "0.0"), (100.0, "100.0"),
])
def test_java_double(value, text):
    assert java_double(value) == text


def test_dataclass_and_to_fastjson_beans():
    @dataclasses.dataclass
    class Conn:
        clientId: str
        version: int
        clientAddr: str | None = None

    class Wrapper:
        def to_fastjson(self):
            return {"connectionSet": [Conn("c1", 409)]}

    assert dumps(Wrapper()) == b'{"connectionSet":[{"clientId":"c1","version":409}]}'


def test_unencodable_raises():
    with pytest.raises(TypeError):
        dumps(object())


def test_loads_standard_fast_path():
    assert loads_lenient(b'{"a":[1,2,{"b":null}]}') == {"a": [1, 2, {"b": None}]}
    assert loads_lenient(memoryview(b'{"0":"x"}')) == {"0": "x"}


def test_loads_unquoted_int_keys():
    text = b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b"}]}'
    data = loads_lenient(text)
    assert data["brokerDatas"][0]["brokerAddrs"] == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}


def test_loads_object_keys():
    text = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:12,{"x":1}:2}}'
    table = loads_lenient(text)["offsetTable"]
    assert table[MessageQueue("t", "b", 0)] == 12
    assert table[FrozenObject([("x", 1)])] == 2


def test_loads_other_fastjson_liberties():
    data = loads_lenient(b"  {a:1, 'b':'x\\'y', -1:[1, 2.5e3, null, true], \"z\":{},}\n")
    assert data == {"a": 1, "b": "x'y", -1: [1, 2500.0, None, True], "z": {}}
    assert loads_lenient('{"s":"\\u00e9"}') == {"s": "é"}


def test_round_trip_both_modes():
    obj = {"offsetTable": {MessageQueue("T", "b", 3): {"brokerOffset": 10}}, "ids": {0: "a", 7: "b"}, "n": "é"}
    assert loads_lenient(dumps(obj)) == obj
    std = loads_lenient(dumps(obj, standard=True))
    assert std["ids"] == {"0": "a", "7": "b"} and std["n"] == "é"


@pytest.mark.parametrize("bad", [b"{", b'{"a" 1}', b"[1,", b'{"a":1} x', b"{@:1}"])
def test_loads_rejects_garbage(bad):
    with pytest.raises(ValueError):
        loads_lenient(bad)


def test_dumps_str_matches_dumps():
    assert dumps_str({1: "é"}).encode("utf-8") == dumps({1: "é"})
