#!/usr/bin/env python3
"""acks.py < tcpdump-text: per bare acknowledgement (no payload, no SYN/FIN),
how many data segments of the opposite flow it acknowledged first; and per
data segment, whether an acknowledgement of it rode on a frame going back."""
import collections
import re
import sys

pat = re.compile(r"IP (\S+) > (\S+): Flags \[([^\]]*)\](?:, seq (\d+):(\d+))?, ack (\d+).*length (\d+)")
unacked = collections.defaultdict(list)  # flow (src, dst) -> data segment ends not yet acked
bare = collections.Counter()             # bare ACK -> how many segments it acked first
riding = 0                               # segments first acked by a frame with payload
data = 0
for line in sys.stdin:
    m = pat.search(line)
    if not m or "S" in m.group(3) or "F" in m.group(3):
        continue
    src, dst, ack, length = m.group(1), m.group(2), int(m.group(6)), int(m.group(7))
    if length > 0:
        unacked[(src, dst)].append(int(m.group(5)))
        data += 1
    back = unacked[(dst, src)]
    n = sum(1 for end in back if end <= ack)
    if n:
        unacked[(dst, src)] = [end for end in back if end > ack]
        if length == 0:
            bare[n] += 1
        else:
            riding += n
nbare = sum(bare.values())
print(f"data segments {data}, bare acknowledgements {nbare} ({nbare / max(data, 1):.2f} per data segment)")
print("segments each bare acknowledgement acknowledged first: "
      + ", ".join(f"{k}: {bare[k]}" for k in sorted(bare)))
print(f"segments acknowledged by a frame going back: {riding}")
