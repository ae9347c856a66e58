# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""An object server for the network tests: HTTP/1.1 keep-alive GET with Range over one in-memory
object, with a time to first byte (delay) and a per-connection rate (paced writes), as an object
store's front end has; and a UDP echo server. Threads of the test process, never traced."""
import socket
import socketserver
import threading
import time


class ObjectServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host, data, delay_s=0.0, rate_bps=0):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.data, self.delay_s, self.rate_bps = data, delay_s, rate_bps
        super().__init__((host, 0), Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self):
        return self.server_address[1]

    def close(self):
        self.shutdown()
        self.server_close()


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock, srv = self.request, self.server
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            rng = next(l.split("=", 1)[1] for l in lines[1:] if l.lower().startswith("range:"))
            first, last = (int(x) for x in rng.split("-"))
            body = srv.data[first:last + 1]
            if srv.delay_s:
                time.sleep(srv.delay_s)
            hdr = (f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(body)}\r\n"
                   f"Content-Range: bytes {first}-{last}/{len(srv.data)}\r\n\r\n").encode()
            if not srv.rate_bps:
                sock.sendall(hdr + body)
                continue
            # Paced: each chunk leaves when the rate allows, from the response's start.
            sock.sendall(hdr)
            start, sent, chunk = time.monotonic(), 0, 16384
            while sent < len(body):
                due = start + sent / srv.rate_bps
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                sock.sendall(body[sent:sent + chunk])
                sent += chunk


class UdpEcho:
    def __init__(self, host):
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except OSError:
                return
            self.sock.sendto(data, peer)

    def close(self):
        self.sock.close()
