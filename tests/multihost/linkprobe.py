#!/usr/bin/python3
"""linkprobe.py - measure the emulated link between two hosts of hosts.sh:
TCP round-trip time (median of 1-byte ping-pongs), one TCP stream's
throughput, and both directions at once on one connection (as a 2-rank
all-reduce uses MPI's one TCP connection per pair), so results can state the
bandwidth and latency they ran on, and whether the shaped link carries its
rate both ways at the same time.

  linkprobe.py serve PORT              (run inside the far host)
  linkprobe.py probe ADDR PORT [MIB]   (run inside the near host)
Prints: "# link ADDR: rtt median X us (p10 Y, p90 Z), one TCP stream W Mbit/s,
both directions at once U / D Mbit/s" (U: near -> far, D: far -> near)."""
import socket
import statistics
import sys
import threading
import time

CHUNK = 1 << 20


def send_mib(c, mib):
    buf = b"\0" * CHUNK
    for _ in range(mib):
        c.sendall(buf)


def recv_bytes(c, n):
    got = 0
    while got < n:
        b = c.recv(min(CHUNK, n - got))
        if not b:
            break
        got += len(b)
    return got


def recv_exact(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d:
            sys.exit("linkprobe.py: the connection closed early")
        b += d
    return b


def duplex(c, mib):
    """Sends and receives mib MiB at once on c; returns when both are done,
    with the start time and the seconds the receiving took."""
    th = threading.Thread(target=send_mib, args=(c, mib))
    t0 = time.perf_counter()
    th.start()
    recv_bytes(c, mib * CHUNK)
    recv_s = time.perf_counter() - t0
    th.join()
    return t0, recv_s


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
    c, _ = s.accept()  # bulk, one way
    while c.recv(CHUNK):
        pass
    c.sendall(b"k")
    c.close()
    c, _ = s.accept()  # both ways at once: the MiB count first
    mib = int(recv_exact(c, 16).decode())
    c.sendall(b"g")
    duplex(c, mib)
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
    t = time.perf_counter()
    send_mib(c, mib)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
    dt = time.perf_counter() - t
    c.close()
    c = socket.create_connection((addr, port))
    c.sendall(b"%-16d" % mib)
    c.recv(1)
    t0, down = duplex(c, mib)
    c.recv(1)  # the far end's "k": it has received everything we sent
    up = time.perf_counter() - t0
    c.close()
    mbit = mib * 8 * 1.048576
    q = statistics.quantiles(rtts, n=10)
    print(f"# link {addr}: rtt median {statistics.median(rtts):.0f} us (p10 {q[0]:.0f}, p90 {q[-1]:.0f}),"
          f" one TCP stream {mbit / dt:.0f} Mbit/s,"
          f" both directions at once {mbit / up:.0f} / {mbit / down:.0f} Mbit/s")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "probe":
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 64)
    else:
        sys.exit(__doc__)
