#!/usr/bin/python3
"""test_delayq.py - delayq.py's parts that need no root: the DELAY syntax and
the packet ids read from a datagram of nfnetlink_queue messages (built here
byte by byte as the kernel lays them out: nlmsghdr, nfgenmsg, attributes
padded to 4 bytes, the packet id big-endian in NFQA_PACKET_HDR). The queue
itself runs in test_shaped_link.sh (hosts.sh --delay). Exit 0 pass, 1 fail."""
import importlib.util
import os
import struct
import sys

spec = importlib.util.spec_from_file_location("delayq", os.path.join(os.path.dirname(__file__), "delayq.py"))
dq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dq)
failed = 0


def check(ok, what):
    global failed
    if not ok:
        print(f"FAIL {what}")
        failed += 1


for text, want in (("2ms", 2e-3), ("500us", 5e-4), ("0.002s", 2e-3), ("1.5ms", 1.5e-3)):
    got = dq.parse_delay(text)
    check(abs(got - want) < 1e-15, f"parse_delay({text!r}) = {got}, expected {want}")
for bad in ("2", "ms", "2 ms", "-1ms", "2sec"):
    try:
        dq.parse_delay(bad)
        check(False, f"parse_delay({bad!r}) accepted")
    except SystemExit:
        pass


def attr(t, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, t) + payload + b"\0" * (-n % 4)


def message(mtype, attrs):
    body = struct.pack("=BBH", 2, 0, 0) + b"".join(attrs)
    return struct.pack("=IHHII", 16 + len(body), mtype, 0, 1, 0) + body


PACKET = (dq.NFNL_SUBSYS_QUEUE << 8) | dq.NFQNL_MSG_PACKET
hdr = lambda pid: attr(dq.NFQA_PACKET_HDR, struct.pack("!IHB", pid, 0x0800, 3))  # id, hw protocol, hook
mark = attr(3, struct.pack("!I", 0xABCD))  # NFQA_MARK: another attribute before the header
data = (message(PACKET, [mark, hdr(7)])
        + message(PACKET, [attr(dq.NFQA_PACKET_HDR | 0x8000, struct.pack("!IHB", 0x01020304, 0x0800, 3))])
        + message((dq.NFNL_SUBSYS_QUEUE << 8) | dq.NFQNL_MSG_CONFIG, [hdr(99)])  # not a packet message
        + message(PACKET, [attr(5, b"\1\2\3"), hdr(9)]))  # an odd-length attribute, padded
got = list(dq.Queue.packet_ids(None, data))
check(got == [7, 0x01020304, 9], f"packet ids {got}, expected [7, 16909060, 9]")
check(list(dq.Queue.packet_ids(None, data[:10])) == [], "a truncated datagram yields no id")
print(f"# test_delayq: {'FAIL' if failed else 'PASS'} ({failed} failed)")
sys.exit(1 if failed else 0)
