#!/usr/bin/python3
"""linkprobe.py - measure the emulated link between two hosts of hosts.sh:
TCP round-trip time (median of 1-byte ping-pongs) and one TCP stream's
throughput, so results can state the bandwidth and latency they ran on.

  linkprobe.py serve PORT              (run inside the far host)
  linkprobe.py probe ADDR PORT [MIB]   (run inside the near host)
Prints: "# link ADDR: rtt median X us (p10 Y, p90 Z), one TCP stream W Mbit/s"."""
import socket
import statistics
import sys
import time


def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(2)
    c, _ = s.accept()  # ping-pong
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(1)
        if not b or b == b"q":
            break
        c.sendall(b)
    c.close()
    c, _ = s.accept()  # bulk
    while c.recv(1 << 20):
        pass
    c.sendall(b"k")
    c.close()


def probe(addr, port, mib):
    for _ in range(50):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.1)
    else:
        sys.exit(f"linkprobe: cannot reach {addr}:{port}")
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for i in range(220):
        t = time.perf_counter()
        c.sendall(b"p")
        c.recv(1)
        if i >= 20:
            rtts.append((time.perf_counter() - t) * 1e6)
    c.sendall(b"q")
    c.close()
    c = socket.create_connection((addr, port))
    buf = b"\0" * (1 << 20)
    t = time.perf_counter()
    for _ in range(mib):
        c.sendall(buf)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
    dt = time.perf_counter() - t
    q = statistics.quantiles(rtts, n=10)
    print(f"# link {addr}: rtt median {statistics.median(rtts):.0f} us (p10 {q[0]:.0f}, p90 {q[-1]:.0f}),"
          f" one TCP stream {mib * 8 * 1.048576 / dt:.0f} Mbit/s")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "probe":
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 64)
    else:
        sys.exit(__doc__)
