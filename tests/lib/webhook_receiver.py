"""A webhook receiver on loopback for the push sinks (docs/moderation.md, "Push"): Python's
http.server, which shares no code with the server, keeping what it is sent. Used by
tests/integration/test_push.py and bench/push_cost.py."""

import http.server
import json
import socket
import threading
import time


class WebhookReceiver:
    """Answers each POST 204 after `delay` seconds (an overloaded chat bridge); keeps the
    (headers, body) of each."""

    def __init__(self, delay=0.0):
        self.posts = []
        self.cond = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 (the standard library's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.cond:
                    outer.posts.append((dict(self.headers), body))
                    outer.cond.notify_all()
                if delay:
                    time.sleep(delay)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def events(self):
        """Every event received, digests unpacked into their listed events."""
        with self.cond:
            return self.events_unlocked()

    def events_unlocked(self):
        out = []
        for _, body in self.posts:
            doc = json.loads(body)
            out.extend(doc["events"] if doc["kind"] == "digest" else [doc])
        return out

    def await_events_of(self, paste_id, n, timeout=60):
        """Waits until `n` events about `paste_id` have arrived, and returns them. Tests that
        share a receiver wait for their own paste's events: a count of every post would be met
        early by an earlier test's events."""
        def mine():
            return [e for e in self.events_unlocked() if e["paste"] == paste_id]
        with self.cond:
            if not self.cond.wait_for(lambda: len(mine()) >= n, timeout):
                raise AssertionError(f"{len(mine())} events about {paste_id}, waited for {n}")
            return mine()

    def await_count(self, n, timeout=60):
        """Waits until the posts received count `n` events (a digest counts its `count`)."""
        def counted():
            return sum(json.loads(b).get("count", 1) for _, b in self.posts)
        with self.cond:
            if not self.cond.wait_for(lambda: counted() >= n, timeout):
                raise AssertionError(f"{counted()} events received, waited for {n}")
            return list(self.posts)


def closed_port_url():
    """A webhook URL at a loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/hook"
