# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A reader of dlbpf recordings written from the format's description (user/records/README.md), not from
dlbpf's code: the tests check what dlbpf wrote and what it reports against it. Both encodings; a file cut
short or corrupt gives the records before the damage and the byte offset where they end."""
import struct

MAGIC = b"DLBPFREC"
HEADER = 200
VERBATIM, COMPACT = 0, 1   # abi_version >> 16 (a recording from before the compact encoding has 0 there)
HDR = 24                 # struct dl_hdr
SLOTS = 1024
SLOT_BYTES = 128
MASK64 = (1 << 64) - 1


class Short(Exception):
    """The bytes end inside a record."""


class Corrupt(Exception):
    pass


class Recording:
    def __init__(self, encoding, header_size, records, end, size, stop):
        self.encoding = encoding
        self.header_size = header_size
        self.records = records   # (offset in the file, the record's bytes as the kernel wrote them)
        self.end = end           # where the last whole record ends
        self.size = size
        self.stop = stop         # None, "cut short" or "corrupt: why"

    def kinds(self):
        """(kind, tgid) -> records."""
        out = {}
        for _, r in self.records:
            size, kind, cpu, ts, tgid, tid = struct.unpack_from("<HHIQII", r)
            out[(kind, tgid)] = out.get((kind, tgid), 0) + 1
        return out


def _varint(data, off):
    v = shift = 0
    while True:
        if off >= len(data):
            raise Short()
        b = data[off]
        off += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, off
        shift += 7
        if shift >= 64:
            raise Corrupt("a varint runs past 64 bits")


def _need(data, off, n):
    if len(data) - off < n:
        raise Short()


def _compact(data, off, state):
    """One record at off: (its bytes, the offset after it)."""
    slots = state["slots"]
    head, off = _varint(data, off)
    mode = head & 3
    if mode == 2 and head == 6:          # sparse: literals and runs of zeros
        size, off = _varint(data, off)
        if not HDR <= size <= 0xFFFF:
            raise Corrupt("a sparse record's size out of range")
        rec = bytearray()
        while len(rec) < size:
            lit, off = _varint(data, off)
            if lit > size - len(rec):
                raise Corrupt("a sparse literal past the size")
            _need(data, off, lit)
            rec += data[off:off + lit]
            off += lit
            zeros, off = _varint(data, off)
            if zeros > size - len(rec) or not lit and not zeros:
                raise Corrupt("a sparse run past the size, or an empty piece")
            rec += bytes(zeros)
        if struct.unpack_from("<H", rec, 0)[0] != size:
            raise Corrupt("a sparse record's header claims another size")
        state["ts"] = struct.unpack_from("<Q", rec, 8)[0]
        return bytes(rec), off
    if mode == 2:
        if head != 2:
            raise Corrupt("a verbatim record's head has more bits")
        _need(data, off, 2)
        size = struct.unpack_from("<H", data, off)[0]
        if size < HDR:
            raise Corrupt("a record of less than its header")
        _need(data, off, size)
        rec = bytes(data[off:off + size])
        state["ts"] = struct.unpack_from("<Q", rec, 8)[0]
        return rec, off + size
    if mode == 3:
        raise Corrupt("head mode 3")
    slot = head >> 3
    if slot >= SLOTS:
        raise Corrupt("slot past the table")
    if mode == 1:
        kind, off = _varint(data, off)
        size, off = _varint(data, off)
        base = [0] * (SLOT_BYTES // 8)
    else:
        if slot not in slots:
            raise Corrupt("delta against an empty slot")
        kind, size, base = slots[slot]
        if head & 4:
            size, off = _varint(data, off)
    if kind > 0xFFFF or not HDR <= size <= SLOT_BYTES:
        raise Corrupt("kind or size out of range")
    n = (size + 7) // 8
    nb = (n + 7) // 8
    _need(data, off, nb)
    bitmap = int.from_bytes(data[off:off + nb], "little")
    off += nb
    if bitmap >> n:
        raise Corrupt("bitmap past the size")
    words = []
    for i in range(n):
        w = state["ts"] if i == 1 else base[i]
        if bitmap >> i & 1:
            z, off = _varint(data, off)
            w = (w + ((z >> 1) ^ -(z & 1))) & MASK64
        words.append(w)
    words[0] &= 0xFFFFFFFF               # word 0 is the cpu; size and kind come from the head
    if size % 8:
        words[-1] &= (1 << (8 * (size % 8))) - 1
    raw = struct.pack("<HHIQ", size, kind, words[0], words[1]) + b"".join(struct.pack("<Q", w) for w in words[2:])
    slots[slot] = (kind, size, words + [0] * (SLOT_BYTES // 8 - n))
    state["ts"] = words[1]
    return raw[:size], off


def _verbatim(data, off, state):
    _need(data, off, HDR)
    size = struct.unpack_from("<H", data, off)[0]
    if size < HDR:
        raise Corrupt("a record of less than its header")
    _need(data, off, size)
    return bytes(data[off:off + size]), off + size


def read(path=None, data=None):
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    if data[:8] != MAGIC:
        raise Corrupt(f"{path}: no {MAGIC!r} header")
    header_size = struct.unpack_from("<I", data, 8)[0]
    encoding = struct.unpack_from("<I", data, 12)[0] >> 16
    step = {VERBATIM: _verbatim, COMPACT: _compact}[encoding]
    state = {"slots": {}, "ts": 0}
    records, off, stop = [], header_size, None
    while off < len(data):
        try:
            rec, nxt = step(data, off, state)
        except Short:
            stop = "cut short"
            break
        except Corrupt as e:
            stop = f"corrupt: {e}"
            break
        records.append((off, rec))
        off = nxt
    return Recording(encoding, header_size, records, off, len(data), stop)


def write_verbatim(path, rec, data):
    """The same records as a verbatim recording: the header as it was, its encoding cleared."""
    header = bytearray(data[:struct.unpack_from("<I", data, 8)[0]])
    struct.pack_into("<I", header, 12, struct.unpack_from("<I", header, 12)[0] & 0xFFFF)
    with open(path, "wb") as f:
        f.write(header)
        for _, r in rec.records:
            f.write(r)
