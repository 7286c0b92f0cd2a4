#!/usr/bin/python3
"""delayq.py - a fixed one-way delay for an emulated host of hosts.sh on a
kernel without sch_netem: packets sent to an NFQUEUE (iptables -j NFQUEUE)
are held DELAY and then accepted, in arrival order.

  delayq.py QUEUE DELAY READY_FILE

QUEUE: the NFQUEUE number; DELAY: 2ms, 500us, 0.002s; READY_FILE is created
once the queue is bound (add the iptables rule after that: without a
listener, NFQUEUE drops). Runs until killed (hosts.sh down kills every
process left in a host's namespace).

Only the packet's metadata crosses to user space (copy mode META) and GSO
packets stay whole (NFQA_CFG_F_GSO), so a 64 KiB segment costs one message;
verdicts go out in batches (NFQNL_MSG_VERDICT_BATCH: every id up to the
newest one due). Linux netlink: nfnetlink_queue, spoken directly (no
library)."""
import collections
import ctypes
import os
import re
import select
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 4
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1


def parse_delay(s):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", s)
    if not m:
        sys.exit(f"delayq.py: DELAY must look like 2ms, 500us or 0.002s, got '{s}'")
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def attr(t, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, t) + payload + b"\0" * (-n % 4)


class Queue:
    def __init__(self, num):
        self.num = num
        self.seq = 0
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:  # root may go past rmem_max: a burst of messages must not overrun the socket
            self.s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
        except OSError:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self.s.bind((0, 0))

    def send(self, mtype, attrs, ack=False):
        self.seq += 1
        body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(self.num)) + b"".join(attrs)
        flags = NLM_F_REQUEST | (NLM_F_ACK if ack else 0)
        self.s.send(struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | mtype, flags, self.seq, 0)
                    + body)
        if ack:
            data = self.s.recv(65536)
            n, t = struct.unpack_from("=IH", data)
            if t == NLMSG_ERROR:
                err = struct.unpack_from("=i", data, 16)[0]
                if err:
                    sys.exit(f"delayq.py: nfnetlink_queue refused a request: {os.strerror(-err)} "
                             "(is another program bound to this queue?)")

    def configure(self):
        self.send(NFQNL_MSG_CONFIG, [attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET))],
                  ack=True)
        self.send(NFQNL_MSG_CONFIG, [attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
                                     attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", 1 << 16)),
                                     attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO)),
                                     attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO))], ack=True)

    def packet_ids(self, data):
        """The packet ids in one datagram of queued-packet messages."""
        off = 0
        while off + 16 <= len(data):
            n, t = struct.unpack_from("=IH", data, off)
            if n < 16:
                break
            if t == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                a = off + 20
                while a + 4 <= off + n:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    if atype & 0x3FFF == NFQA_PACKET_HDR:
                        yield struct.unpack_from("!I", data, a + 4)[0]
                    a += (alen + 3) & ~3
            off += (n + 3) & ~3

    def accept_upto(self, pid):
        self.send(NFQNL_MSG_VERDICT_BATCH, [attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pid))])


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    num, delay, ready = int(sys.argv[1]), parse_delay(sys.argv[2]), sys.argv[3]
    try:  # timer slack 10 us: select's timeouts end close to when the packets are due
        ctypes.CDLL(None).prctl(29, 10000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass
    q = Queue(num)
    q.configure()
    with open(ready, "w") as f:
        f.write(f"{os.getpid()}\n")
    held = collections.deque()  # (due time, packet id), in arrival order
    while True:
        timeout = max(0.0, held[0][0] - time.monotonic()) if held else None
        r, _, _ = select.select([q.s], [], [], timeout)
        if r:
            try:
                data = q.s.recv(1 << 20)
            except OSError as e:  # ENOBUFS: messages were lost; later verdicts cover their ids
                print(f"delayq.py: {e}", file=sys.stderr)
                continue
            due = time.monotonic() + delay
            for pid in q.packet_ids(data):
                held.append((due, pid))
        now = time.monotonic()
        last = None
        while held and held[0][0] <= now:
            last = held.popleft()[1]
        if last is not None:
            q.accept_upto(last)


if __name__ == "__main__":
    main()
