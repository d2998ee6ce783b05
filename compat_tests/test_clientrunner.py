"""Self-test of the subprocess runner (needs no server and no C++ client)."""
import os
import sys
import time

from clientrunner import available_clients, parse_json_lines, run_client_script


def test_runs_script_and_parses_json_lines():
    res = run_client_script(sys.executable, """
        print('client noise')
        emit(op='send', n=1, ns=NAMESRV)
        print('{not json')
        emit(op='recv', body='x', home=_os.environ['HOME'])
    """, env={"NAMESRV": "127.0.0.1:1"}, timeout=20)
    assert res.returncode == 0, res.stderr
    assert not res.timed_out and not res.crashed
    assert [e["op"] for e in res.events] == ["send", "recv"]
    assert res.events_of("send") == [{"op": "send", "n": 1, "ns": "127.0.0.1:1"}]
    assert res.events[1]["home"] == res.log_dir  # HOME points at the temp log dir
    assert not os.path.exists(res.log_dir)  # cleaned up by default


def test_timeout_kills_process_group():
    t = time.monotonic()
    res = run_client_script(sys.executable, """
        import subprocess, sys
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
        emit(op='started')
        _time.sleep(60)
    """, timeout=1.5)
    assert res.timed_out and res.returncode == -9 and not res.crashed
    assert res.events_of("started")
    assert time.monotonic() - t < 15


def test_keep_logs_and_parse_helper(tmp_path):
    res = run_client_script(sys.executable, """
        import os
        d = os.path.join(os.environ['HOME'], 'logs', 'rocketmq-cpp'); os.makedirs(d)
        open(os.path.join(d, '1_rocketmq-cpp.log.0'), 'w').write('hello log')
    """, timeout=20, keep_logs=True)
    try:
        assert "hello log" in res.log_text() and "hello log" in res.client_log
    finally:
        import shutil
        shutil.rmtree(res.log_dir, ignore_errors=True)
    assert parse_json_lines('x\n{"a": 1}\n[1]\n') == [{"a": 1}]


def test_available_clients_shape():
    clients = available_clients(require_import=False)
    assert set(clients) <= {"cpp1", "cpp2"}
    assert all(os.path.isabs(p) for p in clients.values())
