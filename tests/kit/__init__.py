"""The shared test kit of tests/ and compat_tests/ (import its modules: ``from tests.kit.waits import wait_until``).

* :mod:`tests.kit.waits`: bounded waits (``wait_until``, ``poll``, ``eventually``);
* :mod:`tests.kit.loop`: an event loop on a thread (``LoopThread``) for in-process servers;
* :mod:`tests.kit.processes`: rmqd as child processes (``RmqdProcess``, ``ServeProcess``, ``ControllerProcess``),
  ``write_conf``, ``child_env`` for Python child programs;
* :mod:`tests.kit.netfaults`: a TCP proxy that cuts or black-holes a link (``FaultProxy``);
* :mod:`tests.kit.peers`: a fake remoting peer that records the frames it is sent and may answer them
  (``RecordingPeer``);
* :mod:`tests.kit.clients`: remoting requests as clients and mqadmin send them (``call``, ``create_topic``,
  ``create_group``, ``send_v2``);
* :mod:`tests.kit.crash_hooks`: the kill -9 step hook of the crash tests' child processes.
"""
