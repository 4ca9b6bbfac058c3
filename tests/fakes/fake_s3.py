"""A small S3 that misbehaves on demand, for tests of sluice's S3 client and orphan reaper.

An asyncio HTTP/1.1 server with kept-alive connections speaking just enough of the S3 REST API, in
path style (/BUCKET/KEY): PUT, GET and DELETE of an object, DeleteObjects (POST /BUCKET?delete) and
ListObjectsV2 (GET /BUCKET?list-type=2).
Signatures are not checked. Objects live in memory with their modification time.

What it answers is scriptable per request through `rules`: the first rule whose `op` matches the
request ("put", "get", "delete", "delete_objects", "list") and whose `left` is not used up decides how the answer goes
wrong. Rule fields (all optional but `op`):

  interim      send "HTTP/1.1 100 Continue" this many times before the answer
  status       answer this status (with `location` for a redirect) instead of doing the request
  error_code   with `status`: an S3 <Error> body with this Code (e.g. 501 NotImplemented)
  key_errors   delete_objects: {key: code} to report as not deleted (the others are deleted)
  only_interim send the interim answers and then close the connection, never a final answer
  empty        answer 200 with an empty body (GET)
  cl_delta     announce Content-Length = real length + cl_delta (negative: bytes left over after the
               announced end, which then look like the start of the next answer)
  close_short  announce the full length, send all but this many bytes, close (a short body)
  extra        bytes sent right after a correct answer (e.g. a whole second HTTP answer)
  left         how many requests the rule applies to (None: every one)
  probability  apply to each matching request with this probability (0..1)

Listings: `list_dates` is "iso" (what S3 sends), "rfc1123", "missing" or "garbage"; with
`list_stuck` the listing ignores start-after and always says IsTruncated=true.

Run it in a test (FakeS3().start() serves on a thread and returns the endpoint) or alone:
    python3 fake_s3.py --port 9000
"""

import argparse
import asyncio
import email.utils
import random
import threading
import time
import urllib.parse
from xml.etree import ElementTree
from xml.sax.saxutils import escape


class Rule:
    def __init__(self, op, left=None, probability=1.0, **how):
        self.op = op
        self.left = left
        self.probability = probability
        self.how = how


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


class FakeS3:
    def __init__(self, bucket="sluice-test"):
        self.bucket = bucket
        self.objects = {}  # key -> (bytes, mtime)
        self.rules = []
        self.list_dates = "iso"
        self.list_stuck = False
        self.requests = []  # (monotonic time, op, key or query)
        self.deleted = []  # keys deleted, in order, by DELETE or DeleteObjects
        self.lock = threading.Lock()
        self.port = None
        self._loop = None
        self._server = None
        self._thread = None
        self._tasks = set()  # connections being served, on the loop's thread only
        self._rng = random.Random(7)

    # ---- control, from any thread -----------------------------------------------------------
    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def add_rule(self, op, **kw):
        with self.lock:
            self.rules.append(Rule(op, **kw))

    def clear_rules(self):
        with self.lock:
            self.rules.clear()

    def put_object(self, key, body, mtime=None):
        with self.lock:
            self.objects[key] = (body, time.time() if mtime is None else mtime)

    def count(self, op, since=0.0):
        with self.lock:
            return sum(1 for t, o, _ in self.requests if o == op and t >= since)

    def start(self, port=0):
        ready = threading.Event()

        def run():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", port))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake S3 did not start")
        return self.endpoint

    def stop(self):
        if self._loop is None:
            return

        async def close():
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    # ---- the server ---------------------------------------------------------------------------
    def _rule_for(self, op):
        with self.lock:
            for rule in self.rules:
                if rule.op != op or (rule.left is not None and rule.left <= 0):
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    return {}
                if rule.left is not None:
                    rule.left -= 1
                return dict(rule.how)
        return {}

    async def _serve(self, reader, writer):
        self._tasks.add(asyncio.current_task())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if not await self._answer(method, target, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # stop(): ended here, so the stream sees a finished task
            pass
        finally:
            self._tasks.discard(asyncio.current_task())
            writer.close()

    async def _answer(self, method, target, body, writer):
        """Answers one request; returns False when the connection is to be closed."""
        path, _, query = target.partition("?")
        path = urllib.parse.unquote(path)
        params = {k: v[0] for k, v in urllib.parse.parse_qs(query, keep_blank_values=True).items()}
        prefix = f"/{self.bucket}"
        key = path[len(prefix) + 1:] if path.startswith(prefix + "/") else None
        if method == "GET" and key is None and params.get("list-type") == "2":
            op = "list"
        elif key and method in ("PUT", "GET", "DELETE"):
            op = method.lower()
        elif method == "POST" and key is None and "delete" in params:
            op = "delete_objects"
        else:
            await self._send(writer, 400, b"<Error><Code>BadRequest</Code></Error>")
            return True
        with self.lock:
            self.requests.append((time.monotonic(), op, key or query))
        how = self._rule_for(op)
        for _ in range(how.get("interim", 0)):
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if how.get("only_interim"):
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            return False
        if "status" in how:
            extra = {"Location": how["location"]} if "location" in how else {}
            payload = b""
            if "error_code" in how:
                payload = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{how['error_code']}"
                           f"</Code><Message>scripted</Message></Error>").encode()
            await self._send(writer, how["status"], payload, extra)
            return True
        if op == "delete_objects":
            status, payload, extra = self._delete_objects(body, how.get("key_errors", {}))
        else:
            status, payload, extra = self._do(op, key, params, body)
        if op == "get" and status == 200 and how.get("empty"):
            payload = b""
        if "close_short" in how:
            writer.write(self._head(status, len(payload), extra))
            writer.write(payload[:max(0, len(payload) - how["close_short"])])
            await writer.drain()
            return False
        # The extra bytes go out in the same write as the answer, as a peer that frames wrongly
        # would send them.
        await self._send(writer, status, payload, extra,
                         length=len(payload) + how.get("cl_delta", 0), tail=how.get("extra", b""))
        return True

    def _do(self, op, key, params, body):
        with self.lock:
            if op == "put":
                self.objects[key] = (body, time.time())
                return 200, b"", {"ETag": '"x"'}
            if op == "get":
                if key not in self.objects:
                    return 404, b"<Error><Code>NoSuchKey</Code><Message>none</Message></Error>", {}
                data, mtime = self.objects[key]
                return 200, data, {"Last-Modified": email.utils.formatdate(mtime, usegmt=True)}
            if op == "delete":
                self.objects.pop(key, None)
                self.deleted.append(key)
                return 204, b"", {}
            return 200, self._listing(params), {"Content-Type": "application/xml"}

    def _delete_objects(self, body, key_errors):
        try:
            root = ElementTree.fromstring(body)
        except ElementTree.ParseError:
            return 400, b"<Error><Code>MalformedXML</Code></Error>", {}
        ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"

        def find(node, tag):
            return node.findall(ns + tag) + node.findall(tag)

        quiet = any(q.text == "true" for q in find(root, "Quiet"))
        keys = [k.text or "" for o in find(root, "Object") for k in find(o, "Key")]
        parts = ['<?xml version="1.0" encoding="UTF-8"?>'
                 '<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">']
        with self.lock:
            for k in keys:
                if k in key_errors:
                    parts.append(f"<Error><Key>{escape(k)}</Key><Code>{key_errors[k]}</Code>"
                                 f"<Message>scripted</Message></Error>")
                    continue
                self.objects.pop(k, None)
                self.deleted.append(k)
                if not quiet:
                    parts.append(f"<Deleted><Key>{escape(k)}</Key></Deleted>")
        parts.append("</DeleteResult>")
        return 200, "".join(parts).encode(), {"Content-Type": "application/xml"}

    def _listing(self, params):
        # Under self.lock.
        prefix = params.get("prefix", "")
        after = "" if self.list_stuck else params.get("start-after", "")
        max_keys = int(params.get("max-keys", "1000"))
        keys = sorted(k for k in self.objects if k.startswith(prefix) and k > after)
        page, truncated = keys[:max_keys], len(keys) > max_keys or self.list_stuck
        parts = [f'<?xml version="1.0" encoding="UTF-8"?>'
                 f'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                 f"<Name>{self.bucket}</Name><Prefix>{escape(prefix)}</Prefix>"
                 f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
                 f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"]
        for k in page:
            data, mtime = self.objects[k]
            if self.list_dates == "iso":
                date = f"<LastModified>{_iso(mtime)}</LastModified>"
            elif self.list_dates == "rfc1123":
                date = f"<LastModified>{email.utils.formatdate(mtime, usegmt=True)}</LastModified>"
            elif self.list_dates == "garbage":
                date = "<LastModified>not a date</LastModified>"
            else:
                date = ""
            parts.append(f"<Contents><Key>{escape(k)}</Key>{date}<ETag>&quot;x&quot;</ETag>"
                         f"<Size>{len(data)}</Size><StorageClass>STANDARD</StorageClass></Contents>")
        parts.append("</ListBucketResult>")
        return "".join(parts).encode()

    @staticmethod
    def _head(status, length, extra=None):
        reason = {100: "Continue", 200: "OK", 204: "No Content", 301: "Moved Permanently",
                  307: "Temporary Redirect", 400: "Bad Request", 404: "Not Found",
                  405: "Method Not Allowed", 501: "Not Implemented"}.get(status, "X")
        lines = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {length}",
                 "x-amz-request-id: fake"]
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send(self, writer, status, payload, extra=None, length=None, tail=b""):
        if status == 204:
            data = self._head(status, 0, extra).replace(b"Content-Length: 0\r\n", b"")
        else:
            data = self._head(status, len(payload) if length is None else length, extra) + payload
        writer.write(data + tail)
        await writer.drain()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--bucket", default="sluice-test")
    parser.add_argument("--list-dates", default="iso",
                        choices=["iso", "rfc1123", "missing", "garbage"])
    parser.add_argument("--list-stuck", action="store_true")
    args = parser.parse_args()
    s3 = FakeS3(args.bucket)
    s3.list_dates = args.list_dates
    s3.list_stuck = args.list_stuck
    print(f"fake S3 on {s3.start(args.port)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        s3.stop()


if __name__ == "__main__":
    main()
