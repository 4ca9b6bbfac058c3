"""docs/openapi.yaml held against the real binary: every documented operation is called, and what it
answers (status, media type, required JSON fields, documented headers) must be in the description;
every route in src/http/routes.cc's table that the public may call is documented.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_openapi
"""

import json
import os
import re
import unittest

from sluice_harness import SluiceTestCase

try:
    import yaml
except ImportError:  # python3-yaml is a dependency of the test set; say so rather than fail oddly
    yaml = None

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Routes of the public table kept out of the description: the static assets. The admin listener's
# table (AdminRoutes in the same file) is the operator's, described in docs/moderation.md.
UNDOCUMENTED = {"/static/{path...}"}


def load_spec():
    with open(os.path.join(ROOT, "docs", "openapi.yaml")) as f:
        return yaml.safe_load(f)


def deref(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        target = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


@unittest.skipIf(yaml is None, "python3-yaml is not installed")
class OpenApiTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.spec = load_spec()
        self.s = self.server(["--ip-create-rate", "1000", "--ip-create-burst", "1000"])

    def check(self, path, method, res):
        """res must be an answer documented for path/method."""
        op = self.spec["paths"][path][method]
        responses = op["responses"]
        self.assertIn(str(res.status), responses, f"{method.upper()} {path}: undocumented {res!r}")
        doc = deref(self.spec, responses[str(res.status)])
        content = doc.get("content", {})
        ctype = (res.header("Content-Type") or "").split(";")[0].strip()
        if content:
            self.assertIn(ctype, content, f"{method.upper()} {path} {res.status}: {ctype}")
            schema = deref(self.spec, content[ctype].get("schema", {}))
            if ctype == "application/json" and schema.get("type") == "object":
                body = res.json()
                for field in schema.get("required", []):
                    self.assertIn(field, body, f"{method.upper()} {path} {res.status}")
                if schema.get("additionalProperties") is False:
                    self.assertLessEqual(set(body), set(schema["properties"]))
        else:
            self.assertEqual(res.body, b"", f"{method.upper()} {path} {res.status}: {res!r}")
        for name in doc.get("headers", {}):
            header = deref(self.spec, doc["headers"][name])
            if name in ("Retry-After", "Vary", "X-Delete-Token", "Location") or \
                    header.get("schema", {}).get("const"):
                self.assertTrue(res.header(name), f"{method.upper()} {path} {res.status}: {name}")
            const = header.get("schema", {}).get("const")
            if const:
                self.assertEqual(res.header(name), const)
        return res

    def test_every_documented_operation_answers_as_documented(self):
        s = self.s
        created = self.check("/api/v1/pastes", "post", s.create("hello\n"))
        key, token = created.json()["id"], created.json()["delete_token"]
        self.check("/api/v1/pastes", "post",
                   s.create(json.dumps({"content": "x", "ttl": "1h"}),
                            headers={"Content-Type": "application/json"}))
        self.check("/api/v1/pastes", "post",
                   s.create('{"content": 1}', headers={"Content-Type": "application/json"}))
        self.check("/api/v1/pastes", "post", s.create("x", content_length=None))
        self.check("/api/v1/pastes", "post", s.create("x", content_length=10**9))
        self.check("/", "get", s.get("/"))
        self.check("/", "post", s.request("POST", "/", body="form\n", headers={"Accept": "*/*"}))
        self.check("/", "post", s.request("POST", "/", body="", headers={"Accept": "*/*"}))
        self.check("/api/v1/pastes/{id}", "get", s.get(f"/api/v1/pastes/{key}"))
        self.check("/api/v1/pastes/{id}", "get", s.get(f"/api/v1/pastes/{key}?content=1"))
        self.check("/api/v1/pastes/{id}", "get", s.get("/api/v1/pastes/AAAAAAAAAAAA"))
        raw = self.check("/raw/{id}", "get", s.get(f"/raw/{key}"))
        self.check("/raw/{id}", "get", s.get(f"/raw/{key}",
                                              headers={"If-None-Match": raw.header("ETag")}))
        self.check("/raw/{id}", "get", s.get("/raw/AAAAAAAAAAAA"))
        for accept in ("*/*", "text/html"):
            view = self.check("/{id}", "get", s.get(f"/{key}", headers={"Accept": accept}))
            self.check("/{id}", "get", s.get(f"/{key}", headers={
                "Accept": accept, "If-None-Match": view.header("ETag")}))
        self.check("/{id}", "get", s.get(f"/{key}.py", headers={"Accept": "text/html"}))
        self.check("/{id}", "get", s.get("/AAAAAAAAAAAA"))
        haste = self.check("/documents", "post", s.request("POST", "/documents", body="h\n"))
        self.check("/documents/{id}", "get", s.get(f"/documents/{haste.json()['key']}"))
        self.check("/documents/{id}", "get", s.get("/documents/AAAAAAAAAAAA"))
        self.check("/delete/{id}", "get", s.get(f"/delete/{key}?token=x"))
        self.check("/api/v1/pastes/{id}/report", "post", s.request(
            "POST", f"/api/v1/pastes/{key}/report", body='{"reason": "spam"}',
            headers={"Content-Type": "application/json"}))
        self.check("/api/v1/pastes/{id}/report", "post", s.request(
            "POST", f"/api/v1/pastes/{key}/report", body='{"reason": "spam"}',
            headers={"Content-Type": "application/json"}))
        self.check("/api/v1/pastes/{id}/report", "post", s.request(
            "POST", f"/api/v1/pastes/{key}/report", body='{"reason": "boring"}',
            headers={"Content-Type": "application/json"}))
        self.check("/api/v1/pastes/{id}/report", "post", s.request(
            "POST", f"/api/v1/pastes/{key}/report", body='{"reason": "spam"}',
            headers={"Content-Type": "text/plain"}))
        self.check("/report/{id}", "get", s.get(f"/report/{key}", headers={"Accept": "text/html"}))
        self.check("/report/{id}", "post", s.request(
            "POST", f"/report/{key}", body="reason=spam",
            headers={"Content-Type": "application/x-www-form-urlencoded",
                     "Origin": "https://elsewhere.example"}))
        for path in ("/healthz", "/metrics", "/api/v1/limits", "/status", "/api/v1/status",
                     "/abuse", "/robots.txt", "/.well-known/security.txt"):
            self.check(path, "get", s.get(path))
        for accept in ("*/*", "text/html", "application/json"):
            self.check("/transparency", "get", s.get("/transparency", headers={"Accept": accept}))
        self.check("/transparency", "get", s.get("/transparency?format=json",
                                                 headers={"Accept": "text/html"}))
        self.check("/api/v1/pastes/{id}", "delete", s.delete(key))
        self.check("/api/v1/pastes/{id}", "delete", s.delete(key, token=token))
        self.check("/api/v1/pastes/{id}", "delete", s.delete("AAAAAAAAAAAA", token="x"))
        burn = self.check("/api/v1/pastes", "post",
                          s.request("POST", "/api/v1/pastes?burn=1", body="once\n"))
        burn_id = burn.json()["id"]
        self.check("/raw/{id}", "get", s.get(f"/raw/{burn_id}"))
        self.check("/{id}", "get", s.get(f"/{burn_id}", headers={"Accept": "text/html"}))
        for _ in range(2):  # the reading, then 404
            self.check("/api/v1/pastes/{id}/claim", "post",
                       s.request("POST", f"/api/v1/pastes/{burn_id}/claim", body=""))
        # A fork: the create page holding its parent, the diff, a Markdown rendering.
        parent = s.create_ok("one\ntwo\n")["id"]
        self.check("/new", "get", s.get("/new"))
        self.check("/new", "get", s.get(f"/new?from={parent}", headers={"Accept": "text/html"}))
        self.check("/new", "get", s.get("/new?from=AAAAAAAAAAAA"))
        self.check("/new", "get", s.get(f"/new?from={burn_id}"))
        fork = self.check("/api/v1/pastes", "post", s.request(
            "POST", f"/api/v1/pastes?parent={parent}", body="one\n2\n")).json()["id"]
        diff = self.check("/{id}/diff", "get", s.get(f"/{fork}/diff"))
        self.check("/{id}/diff", "get", s.get(f"/{fork}/diff",
                                              headers={"If-None-Match": diff.header("ETag")}))
        self.check("/{id}/diff", "get", s.get(f"/{parent}/diff"))
        self.check("/{id}/rendered", "get", s.get(f"/{parent}/rendered"))
        self.check("/{id}/rendered", "get", s.get("/AAAAAAAAAAAA/rendered"))
        counted = s.request("POST", "/api/v1/pastes?max_views=2", body="twice\n").json()["id"]
        self.check("/{id}/rendered", "get", s.get(f"/{counted}/rendered"))
        self.check("/{id}/diff", "get", s.get(f"/{counted}/diff"))
        burn_id = s.request("POST", "/?burn=1", body="once\n").body.decode().strip()[-12:]
        self.check("/claim/{id}", "post", s.request("POST", f"/claim/{burn_id}", body="",
                                                     headers={"Accept": "text/html"}))
        other = s.create_ok("again\n")
        self.check("/delete/{id}", "post", s.request(
            "POST", f"/delete/{other['id']}", body=f"token={other['delete_token']}",
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}))

    def test_a_rate_limit_refusal_carries_its_documented_headers(self):
        s = self.server(["--ip-create-rate", "0.001", "--ip-create-burst", "1"])
        self.assertEqual(s.create("one\n").status, 201)
        res = s.create("two\n")
        self.assertEqual(res.status, 429, res)
        self.s = s
        self.check("/api/v1/pastes", "post", res)
        for name in ("RateLimit-Policy", "RateLimit"):
            self.assertTrue(res.header(name), res)
        res = s.request("POST", "/documents", body="three\n")
        self.check("/documents", "post", res)
        self.assertTrue(res.json()["message"])

    def test_a_create_access_refusal_is_documented_on_every_create_route(self):
        for mode, status in (("tokens", 401), ("networks", 403)):
            s = self.server(["--create-access", mode])
            self.s = s
            self.assertEqual(s.get("/api/v1/limits").json()["create_access"], mode)
            self.check("/api/v1/limits", "get", s.get("/api/v1/limits"))
            for path, res in (("/api/v1/pastes", s.create("x\n")),
                              ("/api/v1/pastes", s.create('{"content": "x"}', headers={
                                  "Content-Type": "application/json"})),
                              ("/", s.request("POST", "/", body="x\n", headers={"Accept": "*/*"})),
                              ("/documents", s.request("POST", "/documents", body="x\n"))):
                self.assertEqual(res.status, status, res)
                self.check(path, "post", res)

    def test_every_public_route_is_documented(self):
        with open(os.path.join(ROOT, "src", "http", "routes.cc")) as f:
            table = f.read().split("std::vector<Route> AdminRoutes()")[0]
        routes = set(re.findall(r'^\s*\{"(/[^"]*)",', table, re.M))
        self.assertIn("/documents", routes)
        self.assertEqual(routes - UNDOCUMENTED, set(self.spec["paths"]))


if __name__ == "__main__":
    unittest.main()
