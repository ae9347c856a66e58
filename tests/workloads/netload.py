#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A loader that fetches objects from an HTTP server with range requests, the way a streaming
data set reads shards from an object store, and counts what it received itself.

    netload.py HOST PORT OBJECT --size N --requests R [--conns C] [--buf B] [--readv]
               [--udp HOST:PORT:COUNT[,...]]

R range requests of N bytes each (consecutive ranges of OBJECT) over C keep-alive connections
(round robin, each request answered before the next), read with recv_into (recvfrom), or with
--readv by readv on the socket's fd, into a B-byte buffer.
--udp sends COUNT datagrams to a UDP echo server on a connected socket and receives each echo.
Prints one JSON line: per connection its endpoint, local port, bytes and receive calls, and the
loader's own clock around each receive call and each request (the time it waited)."""
import argparse
import json
import os
import socket
import time


def endpoint(sock):
    host, port = sock.getpeername()[:2]
    return {"address": host, "port": port, "family": "ipv6" if sock.family == socket.AF_INET6 else "ipv4"}


class Conn:
    def __init__(self, host, port, bufsize, readv):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.connect((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(bufsize)
        self.view = memoryview(self.buf)
        self.pending = b""   # bytes past the headers a receive brought with them
        self.readv = readv
        self.truth = dict(endpoint(self.sock), local_port=self.sock.getsockname()[1], protocol="tcp",
                          bytes=0, recvs=0, recv_ns=0, requests=0, request_ns=0)

    def recv(self):
        t0 = time.perf_counter_ns()
        n = os.readv(self.sock.fileno(), [self.view]) if self.readv else self.sock.recv_into(self.view)
        self.truth["recv_ns"] += time.perf_counter_ns() - t0
        self.truth["recvs"] += 1
        self.truth["bytes"] += n
        if n == 0:
            raise SystemExit("the server closed the connection")
        return bytes(self.view[:n])

    def get(self, path, first, last):
        t0 = time.perf_counter_ns()
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nRange: bytes={first}-{last}\r\n\r\n".encode())
        data = self.pending
        while b"\r\n\r\n" not in data:
            data += self.recv()
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        if " 206 " not in lines[0]:
            raise SystemExit(f"unexpected response: {lines[0]}")
        length = next(int(l.split(":", 1)[1]) for l in lines[1:] if l.lower().startswith("content-length:"))
        got = len(body)
        while got < length:
            got += len(self.recv())
        # A response never runs past its length here (one request in flight), so nothing is pending.
        self.pending = b""
        self.truth["requests"] += 1
        self.truth["request_ns"] += time.perf_counter_ns() - t0
        return length


def udp_exchange(spec):
    host, port, count = spec.rsplit(":", 2)
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.connect((host, int(port)))
    buf = bytearray(2048)
    t = dict(endpoint(s), local_port=s.getsockname()[1], protocol="udp", bytes=0, recvs=0, recv_ns=0,
             requests=0, request_ns=0)
    for i in range(int(count)):
        # Sizes that differ per datagram, so a lost or doubled one shows in the bytes.
        s.send(os.urandom(100 + 37 * i))
        t0 = time.perf_counter_ns()
        n = s.recv_into(buf)
        t["recv_ns"] += time.perf_counter_ns() - t0
        t["recvs"] += 1
        t["bytes"] += n
    s.close()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("object")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--buf", type=int, default=65536)
    ap.add_argument("--readv", action="store_true")
    ap.add_argument("--udp")
    a = ap.parse_args()
    conns = [Conn(a.host, a.port, a.buf, a.readv) for _ in range(a.conns)]
    t0 = time.perf_counter_ns()
    for i in range(a.requests):
        conns[i % len(conns)].get(a.object, i * a.size, (i + 1) * a.size - 1)
    wall = time.perf_counter_ns() - t0
    out = [c.truth for c in conns]
    for c in conns:
        c.sock.close()
    if a.udp:
        for spec in a.udp.split(","):
            out.append(udp_exchange(spec))
    print(json.dumps({"pid": os.getpid(), "wall_ns": wall, "conns": out}), flush=True)


if __name__ == "__main__":
    main()
