"""A lying Hyades for scripts/validator-epochs.sh: a proxy in front of the real one that passes
everything through except the answer to `getEpochTransition [EPOCH]`, which it forges as MODE says:

  wrong_set          a member's stake (and the total) one more: not the set the slot's bank binds
  rebound            changed so, and the evidence's nextSetHash made the changed set's: the bank
                     hash the evidence describes is no longer the one the set voted for
  set_not_bound      the evidence's nextSetHash zeroed: the slot binds no set
  slot_not_in_epoch  the evidence of the transition to EPOCH + 1: a slot of the wrong epoch

Both ways to reach Hyades go through it:
  - JSON-RPC over HTTP (any request; POST bodies forged): `aldb proof --url`, follow-epochs.mjs,
    and the relayer's getEpochTransition and getSlotVotes;
  - WebSocket (a GET with `Upgrade: websocket`): the relayer's root feed (rootSubscribe and
    getStateRoots). The upgrade goes upstream without Sec-WebSocket-Extensions, so no compression
    is negotiated and the frames stay readable; every frame is passed on as it came, except the
    answer to a getEpochTransition asked over the socket, forged like the HTTP one.

MODE and EPOCH come from the path, `/MODE/EPOCH` (`http://PROXY/MODE/EPOCH`,
`ws://PROXY/MODE/EPOCH/ws`), stripped before it goes upstream; or, for a path without them, from
the command line. The relayer needs the latter: it posts its JSON-RPC calls to `http://HOST/` of
its WebSocket endpoint, whatever the endpoint's path.

Usage: python3 forge_proxy.py UPSTREAM PORT [MODE EPOCH]   (UPSTREAM: Hyades' http://HOST:PORT)
It prints one line when it listens, one per transition forged, and on SIGTERM or SIGINT the
methods it passed by transport. Standard library only (and scripts/lib/cluster.py)."""

import asyncio
import http
import json
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter

from cluster import b58encode, set_hash

MODES = ("wrong_set", "rebound", "set_not_bound", "slot_not_in_epoch")
# A frame this large is no answer of Hyades' (its largest, a transition of 65,536 members, is
# some 13 MB); the connection is dropped.
MAX_FRAME = 64 << 20


def frame(payload, opcode=1):
    """One unmasked final frame, as a server sends it."""
    n = len(payload)
    if n < 126:
        size = bytes([n])
    elif n < 1 << 16:
        size = bytes([126]) + n.to_bytes(2, "big")
    else:
        size = bytes([127]) + n.to_bytes(8, "big")
    return bytes([0x80 | opcode]) + size + payload


async def read_frame(reader):
    """(fin, opcode, payload unmasked, the frame's bytes as read)."""
    head = await reader.readexactly(2)
    n = head[1] & 0x7F
    ext = b""
    if n == 126:
        ext = await reader.readexactly(2)
        n = int.from_bytes(ext, "big")
    elif n == 127:
        ext = await reader.readexactly(8)
        n = int.from_bytes(ext, "big")
    if n > MAX_FRAME:
        raise ConnectionError(f"a frame of {n} bytes")
    key = await reader.readexactly(4) if head[1] & 0x80 else b""
    payload = await reader.readexactly(n)
    raw = head + ext + key + payload
    if key:
        mask = (key * (n // 4 + 1))[:n]
        payload = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big")
    return bool(head[0] & 0x80), head[0] & 0x0F, payload, raw


class Proxy:
    def __init__(self, upstream, mode=None, epoch=None):
        u = urllib.parse.urlsplit(upstream)
        self.host, self.port = u.hostname, u.port or 80
        self.base = f"http://{self.host}:{self.port}"
        self.default = (mode, epoch) if mode else None
        self.methods = Counter()
        self.forged = Counter()
        self.lock = threading.Lock()  # forge() runs in worker threads

    def route(self, path):
        """The forging a path asks for (or the command line's) and the path upstream."""
        parts = path.split("/")
        if len(parts) >= 3 and parts[1] in MODES and parts[2].isdigit():
            return (parts[1], int(parts[2])), "/" + "/".join(parts[3:])
        return self.default, path

    def request(self, method, path, body=None, headers=None):
        """Hyades' (status, content type, body); blocking."""
        req = urllib.request.Request(self.base + path, body, headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.headers.get("content-type", "application/json"), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("content-type", "application/json"), e.read()

    @staticmethod
    def asks_forged(req, forging):
        return (forging is not None and isinstance(req, dict) and req.get("method") == "getEpochTransition"
                and req.get("params") == [forging[1]])

    def forge(self, forging, answer, transport):
        """Forges the answer to the transition forged in place (blocking: one mode asks Hyades)."""
        mode, epoch = forging
        if not isinstance(answer, dict) or not isinstance(answer.get("result"), dict):
            return False
        t = answer["result"]["value"]
        if mode in ("wrong_set", "rebound"):
            t["set"]["validators"][0]["stake"] += 1
            t["set"]["totalStake"] += 1
            if mode == "rebound":
                t["evidence"]["nextSetHash"] = b58encode(set_hash(t["set"]))
        elif mode == "set_not_bound":
            t["evidence"]["nextSetHash"] = b58encode(bytes(32))
        else:
            ask = {"jsonrpc": "2.0", "id": 1, "method": "getEpochTransition", "params": [epoch + 1]}
            _, _, nxt = self.request("POST", "/", json.dumps(ask).encode(), {"content-type": "application/json"})
            t["evidence"] = json.loads(nxt)["result"]["value"]["evidence"]
        with self.lock:
            self.forged[transport] += 1
        print(f"forged the transition to epoch {epoch} ({transport}): {mode}", flush=True)
        return True

    def count(self, transport, body):
        try:
            req = json.loads(body)
        except ValueError:
            return None
        for r in req if isinstance(req, list) else [req]:
            if isinstance(r, dict):
                self.methods[(transport, str(r.get("method")))] += 1
        return req

    def exchange(self, forging, req, method, path, body, headers):
        """One HTTP request (`req` its body parsed) passed on, its answer forged if it asked for
        the transition forged; blocking."""
        status, ctype, data = self.request(method, path, body, headers)
        if forging is None or req is None:
            return status, ctype, data
        try:
            answer = json.loads(data)
        except ValueError:
            return status, ctype, data
        changed = False
        if isinstance(req, list) and isinstance(answer, list):
            by_id = {json.dumps(r.get("id")): r for r in req if isinstance(r, dict)}
            for a in answer:
                if isinstance(a, dict) and self.asks_forged(by_id.get(json.dumps(a.get("id"))), forging):
                    changed |= self.forge(forging, a, "http")
        elif self.asks_forged(req, forging):
            changed = self.forge(forging, answer, "http")
        return status, ctype, json.dumps(answer).encode() if changed else data

    async def handle(self, reader, writer):
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, version = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                forging, upath = self.route(path)
                if headers.get("upgrade", "").lower() == "websocket":
                    await self.websocket(reader, writer, lines, method, upath, version, forging)
                    return
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = b""
                    while True:
                        n = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                        if n == 0:
                            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                                pass
                            break
                        body += await reader.readexactly(n)
                        await reader.readexactly(2)
                else:
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                fwd = {k: v for k, v in headers.items() if k in ("content-type", "accept")}
                req = self.count("http", body) if method == "POST" else None
                status, ctype, data = await asyncio.to_thread(self.exchange, forging, req, method, upath,
                                                              body if method == "POST" else None, fwd)
                try:
                    phrase = http.HTTPStatus(status).phrase
                except ValueError:
                    phrase = ""
                writer.write(f"HTTP/1.1 {status} {phrase}\r\ncontent-type: {ctype}\r\n"
                             f"content-length: {len(data)}\r\n\r\n".encode("latin-1") + data)
                await writer.drain()
                if headers.get("connection", "").lower() == "close" or version == "HTTP/1.0":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError) as e:
            print(f"connection dropped: {e!r}", flush=True)
        finally:
            writer.close()

    async def websocket(self, reader, writer, lines, method, upath, version, forging):
        ur, uw = await asyncio.open_connection(self.host, self.port)
        try:
            out = [f"{method} {upath} {version}"] + [
                line for line in lines[1:] if line and not line.lower().startswith("sec-websocket-extensions:")]
            uw.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            await uw.drain()
            answer = await ur.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            if b" 101 " not in answer.split(b"\r\n", 1)[0] + b" ":
                return
            asked = set()  # ids of the forged transition's requests over this socket
            pumps = [asyncio.create_task(self.pump(reader, uw, True, asked, forging)),
                     asyncio.create_task(self.pump(ur, writer, False, asked, forging))]
            _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for p in pending:
                p.cancel()
        finally:
            uw.close()

    async def pump(self, src, dst, from_client, asked, forging):
        """Frames from one side to the other; a message is held until its last fragment, control
        frames (ping, pong, close) pass at once."""
        parts, raws, opcode = [], [], None
        try:
            while True:
                fin, op, payload, raw = await read_frame(src)
                if op >= 8:
                    dst.write(raw)
                    await dst.drain()
                    continue
                if op != 0:
                    opcode = op
                parts.append(payload)
                raws.append(raw)
                if not fin:
                    continue
                message, raw = b"".join(parts), b"".join(raws)
                parts, raws = [], []
                if opcode == 1:
                    new = await self.look(message, from_client, asked, forging)
                    if new is not None:
                        raw = frame(new)
                dst.write(raw)
                await dst.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def look(self, message, from_client, asked, forging):
        """A text message passing: requests for the transition forged are noted, their answers
        forged (the new message), anything else left as it is (None)."""
        if from_client:
            req = self.count("websocket", message)
            for r in req if isinstance(req, list) else [req]:
                if self.asks_forged(r, forging):
                    asked.add(json.dumps(r.get("id")))
            return None
        if not asked:
            return None
        try:
            answer = json.loads(message)
        except ValueError:
            return None
        changed = False
        for a in answer if isinstance(answer, list) else [answer]:
            key = json.dumps(a.get("id")) if isinstance(a, dict) and "method" not in a else None
            if key in asked:
                asked.discard(key)
                changed |= await asyncio.to_thread(self.forge, forging, a, "websocket")
        return json.dumps(answer).encode() if changed else None

    def summary(self):
        by = {}
        for (transport, method), n in sorted(self.methods.items()):
            by.setdefault(transport, []).append(f"{method} {n}")
        passed = "; ".join(f"{t}: {', '.join(m)}" for t, m in by.items()) or "nothing"
        forged = ", ".join(f"{t} {n}" for t, n in sorted(self.forged.items())) or "none"
        return f"methods passed: {passed}; transitions forged: {forged}"


async def main():
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] not in MODES):
        sys.exit(f"usage: forge_proxy.py UPSTREAM PORT [MODE EPOCH]; MODE one of {', '.join(MODES)}")
    mode, epoch = (sys.argv[3], int(sys.argv[4])) if len(sys.argv) == 5 else (None, None)
    proxy = Proxy(sys.argv[1], mode, epoch)
    port = int(sys.argv[2])
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    print(f"listening on 127.0.0.1:{port} in front of {proxy.base}"
          + (f", forging the transition to epoch {epoch}: {mode}" if mode else ", forging as each path says"), flush=True)
    async with server:
        await stop.wait()
    print(proxy.summary(), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
