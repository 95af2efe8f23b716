#!/usr/bin/env python3
"""Asks a real redis-server for the expected replies of table rows and prints them as Rust tests
for crates/server/src/resp_cases (notation: crates/server/src/testkit.rs).

Input: groups of request lines, each group headed `## test_name [resp2|resp3|both]` (default
both: the group runs on a RESP2 and on a RESP3 connection, each after FLUSHALL; where the replies
differ, one `check_versions` table holds both). Lines starting with `#` are comments.

    redis-server --port 6399 --save '' --databases 1 &
    scripts/resp_rows.py rows.txt 6399 > rows.rs

Each request must produce exactly one reply (write rows for SUBSCRIBE and the like by hand).
"""

import socket
import sys

ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t"}


def split_line(line: str) -> list[bytes]:
    """A command line split into arguments, redis-cli style (as testkit::split_line)."""
    args, i, n = [], 0, len(line)
    while True:
        while i < n and line[i].isspace():
            i += 1
        if i >= n:
            return args
        arg = bytearray()
        if line[i] == '"':
            i += 1
            while line[i] != '"':
                c = line[i]
                i += 1
                if c != "\\":
                    arg += c.encode()
                    continue
                e = line[i]
                i += 1
                if e == "x":
                    arg.append(int(line[i:i + 2], 16))
                    i += 2
                else:
                    arg += ESCAPES.get(e, e.encode())
            i += 1
        else:
            while i < n and not line[i].isspace():
                arg += line[i].encode()
                i += 1
        args.append(bytes(arg))


def escape(data: bytes) -> str:
    out = []
    for b in data:
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif b in (10, 13, 9):
            out.append({10: "\\n", 13: "\\r", 9: "\\t"}[b])
        elif 0x20 <= b <= 0x7E:
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


class Conn:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def send(self, args: list[bytes]) -> str:
        parts = [b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]
        self.sock.sendall(b"".join(parts))
        return self.render()

    def render(self) -> str:
        """One reply in the notation of testkit::render."""
        line = self.file.readline()[:-2]
        kind, rest = chr(line[0]), line[1:].decode("latin1")
        if kind in "+-:,#(_":
            return kind + rest
        if kind in "$=!":
            if int(rest) < 0:
                return kind + "-1"
            data = escape(self.file.read(int(rest) + 2)[:-2])
            return {"$": '"' + data + '"', "=": "=" + data, "!": "-" + data}[kind]
        if kind == "*" and int(rest) < 0:
            return "*-1"
        if kind in "*~>":
            items = [self.render() for _ in range(int(rest))]
            return {"*": "[", "~": "~[", ">": ">["}[kind] + ", ".join(items) + "]"
        if kind == "%":
            items = [self.render() + ": " + self.render() for _ in range(int(rest))]
            return "{" + ", ".join(items) + "}"
        raise ValueError(f"not a RESP reply: {line!r}")


def rust_str(s: str) -> str:
    if '"' not in s and "\\" not in s:
        return '"' + s + '"'
    hashes = "#"
    while '"' + hashes in s:
        hashes += "#"
    return f'r{hashes}"{s}"{hashes}'


def run(port: int, lines: list[str], resp3: bool) -> list[tuple[str, str]]:
    conn = Conn(port)
    conn.send([b"FLUSHALL"])
    if resp3:
        conn.send([b"HELLO", b"3"])
    return [(line, conn.send(split_line(line))) for line in lines]


def emit(name: str, check: str, rows) -> None:
    print(f"#[test]\nfn {name}() {{\n    {check}(&[")
    for row in rows:
        print("        (" + ", ".join(rust_str(cell) for cell in row) + "),")
    print("    ]);\n}\n")


def main() -> None:
    spec, port = sys.argv[1], int(sys.argv[2])
    groups = []
    for line in open(spec):
        line = line.strip()
        if line.startswith("## "):
            name, *mode = line[3:].split()
            groups.append((name, mode[0] if mode else "both", []))
        elif line and not line.startswith("#"):
            groups[-1][2].append(line)
    for name, mode, lines in groups:
        if mode == "resp2":
            emit(name, "check2", run(port, lines, False))
        elif mode == "resp3":
            emit(name, "check3", run(port, lines, True))
        else:
            resp2, resp3 = run(port, lines, False), run(port, lines, True)
            if resp2 == resp3:
                emit(name, "check_both", resp2)
            else:
                rows = [(l, a, "=" if a == b else b) for (l, a), (_, b) in zip(resp2, resp3)]
                emit(name, "check_versions", rows)


if __name__ == "__main__":
    main()
