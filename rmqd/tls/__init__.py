"""TLS for rmqd's servers and clients, with the Java broker's and proxy's configuration names.

- ``settings``: what TLS is asked for (Java's ``TlsSystemConfig`` keys for remoting, the proxy's ``tls*`` keys for
  gRPC), read from the environment (Java's system properties), broker.conf / namesrv.conf and ``tls.config.file``.
- ``certificates``: the test-mode self-signed certificate (made once, kept on disk) and key decryption.
- ``contexts``: the ``ssl.SSLContext`` of a server or client, built off the event loop on first need.
- ``acceptor``: a listening socket whose connections are TLS or plaintext by their first byte (0x16 = a TLS
  handshake record, as Java's ``TlsModeHandler``); TLS connections get asyncio's SSL transport (OpenSSL does the
  work), plaintext ones the bare socket, and the protocol above sees the same bytes either way.
"""
