#!/usr/bin/env python3
"""A misbehaving language server for kaji's tests. The first argument says how:

hang     reads everything, answers nothing (not even `initialize`)
exit     answers `initialize`, then exits as soon as a document is opened
garbage  answers `initialize`, then writes bytes that are not LSP framing
flood    answers `initialize`, then answers every document with thousands of
         publishDiagnostics for a version that never comes, and never for
         the one sent
"""
import json
import sys

mode = sys.argv[1]
inp = sys.stdin.buffer
out = sys.stdout.buffer


def read():
    length = None
    while True:
        line = inp.readline()
        if not line:
            sys.exit(0)
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(inp.read(length))


def send(msg):
    body = json.dumps(msg).encode()
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out.flush()


while True:
    msg = read()
    if mode == "hang":
        continue
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"capabilities": {"textDocumentSync": 1}}})
    elif method in ("textDocument/didOpen", "textDocument/didChange"):
        if mode == "exit":
            sys.exit(3)
        if mode == "garbage":
            out.write(b"this is not a header\r\n\r\n{{{")
            out.flush()
        if mode == "flood":
            uri = msg["params"]["textDocument"]["uri"]
            diag = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                    "severity": 1, "message": "flood"}
            for _ in range(3000):
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                      "params": {"uri": uri, "version": -5, "diagnostics": [diag] * 50}})
