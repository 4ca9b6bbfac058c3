"""Logs an operator can ship (issue 15, item 6): log_format = "json", the access log and its
sampling, and the request id.

The request id is the X-Request-Id a trusted proxy sent (when well-formed) or one the server
mints; it is echoed on every answer and written on the request's access log line. A client that is
not a trusted proxy cannot choose it. The access log keeps a prefix of the client key (the /24),
never the address itself.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_logs
"""

import json
import re
import unittest

from sluice_harness import SluiceTestCase, wait_until

MINTED = re.compile(r"^[0-9a-f]{16}$")


def server_lines(server):
    """The server's own lines (the harness writes '===== start' headers into the same file)."""
    return [l for l in server.log().splitlines() if l and not l.startswith("=====")]


class JsonAccessLogTest(SluiceTestCase):
    def start(self, *args):
        return self.server(["--log-format", "json", "--access-log", "true", *args])

    def access_lines(self, server, count):
        def found():
            lines = [json.loads(l) for l in server_lines(server)]
            access = [l for l in lines if l["message"] == "access"]
            return access if len(access) >= count else None
        return wait_until(found, message=f"{count} access lines")

    def test_every_line_is_one_json_object_and_a_request_has_its_fields(self):
        server = self.start("--trusted-proxy", "127.0.0.1")
        res = server.create("hello\n", headers={"X-Request-Id": "edge-42.a:b"})
        self.assertEqual(res.status, 201, res)
        self.assertEqual(res.header("X-Request-Id"), "edge-42.a:b")
        server.stop()
        lines = server_lines(server)
        self.assertGreater(len(lines), 2)
        for line in lines:
            with self.subTest(line=line):
                doc = json.loads(line)
                self.assertRegex(doc["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
                self.assertIn(doc["level"], ("trace", "debug", "info", "warning", "error",
                                             "critical"))
                self.assertIsInstance(doc["message"], str)
        access = [json.loads(l) for l in lines if json.loads(l)["message"] == "access"]
        self.assertEqual(len(access), 1, lines)
        line = access[0]
        self.assertEqual(line["request_id"], "edge-42.a:b")
        self.assertEqual(line["method"], "POST")
        self.assertEqual(line["route"], "create_api")
        self.assertEqual(line["status"], 201)
        self.assertEqual(line["reason"], "")
        self.assertEqual(line["client"], "127.0.0.0/24")
        self.assertIsInstance(line["latency_ms"], float)
        self.assertGreaterEqual(line["latency_ms"], 0)
        # The client key itself is never written by the access log.
        self.assertNotIn("127.0.0.1", json.dumps(access))

    def test_a_refusal_carries_its_reason_and_a_minted_id(self):
        server = self.start()
        res = server.get("/nosuchpaste1")
        self.assertEqual(res.status, 404)
        minted = res.header("X-Request-Id")
        self.assertRegex(minted, MINTED)
        line = self.access_lines(server, 1)[0]
        self.assertEqual((line["request_id"], line["route"], line["status"], line["reason"]),
                         (minted, "view", 404, "not_found"))


class RequestIdTest(SluiceTestCase):
    def test_a_client_that_is_not_a_trusted_proxy_cannot_choose_its_id(self):
        server = self.server()
        ids = set()
        for path in ("/healthz", "/metrics", "/api/v1/limits", "/nosuchpaste1"):
            res = server.get(path, headers={"X-Request-Id": "chosen-by-client"})
            with self.subTest(path=path):
                self.assertRegex(res.header("X-Request-Id") or "", MINTED)
                ids.add(res.header("X-Request-Id"))
        self.assertEqual(len(ids), 4, "each request gets its own id")

    def test_a_malformed_id_from_a_trusted_proxy_is_replaced(self):
        server = self.server(["--trusted-proxy", "127.0.0.1"])
        for bad in ("has space", "x" * 129, "quote\"d", "semi;colon", "<script>"):
            with self.subTest(bad=bad[:20]):
                res = server.get("/healthz", headers={"X-Request-Id": bad})
                self.assertEqual(res.status, 200)
                self.assertRegex(res.header("X-Request-Id"), MINTED)
        longest = "y" * 128
        self.assertEqual(server.get("/healthz", headers={"X-Request-Id": longest})
                         .header("X-Request-Id"), longest)


class AccessLogSamplingTest(SluiceTestCase):
    def test_without_the_setting_there_is_no_access_log(self):
        server = self.server()
        server.get("/healthz")
        server.create_ok("x\n")
        server.stop()
        self.assertFalse([l for l in server_lines(server) if " access " in l or
                          l.endswith(" access")], server.log())

    def test_sample_zero_keeps_only_the_5xx_in_text_format(self):
        server = self.server(["--access-log", "true", "--access-log-sample", "0",
                              "--fault-injection", "true", "--faults", "blob.put:refuse"])
        for _ in range(5):
            self.assertEqual(server.get("/healthz").status, 200)
        res = server.create("refused by the store\n")
        self.assertEqual(res.status, 503, res)
        rid = res.header("X-Request-Id")
        line = wait_until(lambda: next((l for l in server_lines(server)
                                        if f"request_id={rid}" in l), None),
                          message="the 503's access line")
        self.assertIn("[info] access ", line)
        self.assertIn("method=POST route=create_api status=503", line)
        self.assertIn("client=127.0.0.0/24", line)
        self.assertRegex(line, r"latency_ms=\d+\.\d{3}")
        server.stop()
        access = [l for l in server_lines(server) if "] access " in l]
        self.assertEqual(len(access), 1, access)


if __name__ == "__main__":
    unittest.main()
