"""Who may create (issue 46, items 1 and 3; docs/admission.md, "Who may create"):
`create_access = anyone | tokens | networks | tokens_or_networks` on every create route (the API's
raw body and JSON envelope, the form, haste's, and a fork), with reads public in every mode; the
refusal's status (401 where a credential would help, else 403), JSON body and page with the
operator's text; `/api/v1/limits` naming the mode; the forward-auth header honoured from a trusted
proxy only, validated, and keyed with budgets of its own inside the global caps; the networks file
read again on SIGHUP without failing a request in flight.

Every test client is 127.0.0.1: a server that trusts it as its proxy takes the client address
from X-Forwarded-For, which is how these tests come from inside or outside the allow-list.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_create_access
"""

import json
import os
import signal
import threading
import time
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until

BROWSER = "text/html,application/xhtml+xml"
USER_HEADER = "X-Forwarded-User"
OPERATOR_TEXT = "Ask ops@example.org for a VPN account; reading stays open."

# Who asks, through the trusted proxy on 127.0.0.1.
OUTSIDER = {"X-Forwarded-For": "203.0.113.7"}
INSIDER = {"X-Forwarded-For": "10.1.2.3"}
NAMED = {"X-Forwarded-For": "203.0.113.7", USER_HEADER: "alice"}

# What each mode answers each of them: the status class of a refusal, or None for a create.
EXPECTED = {
    "anyone": {"outsider": None, "insider": None, "named": None},
    "tokens": {"outsider": 401, "insider": 401, "named": None},
    "networks": {"outsider": 403, "insider": None, "named": 403},
    "tokens_or_networks": {"outsider": 401, "insider": None, "named": None},
}
CREATORS = {"outsider": OUTSIDER, "insider": INSIDER, "named": NAMED}
REASON = {401: "create_access_credential", 403: "create_access_network"}


def form(fields, accept="*/*"):
    boundary = "xyzzy"
    body = "".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                   for k, v in fields.items()) + f"--{boundary}--\r\n"
    return body.encode(), {"Accept": accept,
                           "Content-Type": f"multipart/form-data; boundary={boundary}"}


def create_on(s, route, who, parent=None, accept="*/*"):
    """A create on `route` with `who`'s headers; returns the Response."""
    text = f"created on {route}\n"
    if route == "raw":
        return s.request("POST", "/api/v1/pastes", body=text, headers={**who, "Accept": accept})
    if route == "json":
        return s.request("POST", "/api/v1/pastes", body=json.dumps({"content": text}),
                         headers={**who, "Content-Type": "application/json", "Accept": accept})
    if route == "form":
        body, headers = form({"content": text, "ttl": "1h"}, accept)
        return s.request("POST", "/", body=body, headers={**who, **headers})
    if route == "haste":
        return s.request("POST", "/documents", body=text, headers={**who, "Accept": accept})
    if route == "fork":
        return s.request("POST", f"/api/v1/pastes?parent={parent}", body="a fork\n",
                         headers={**who, "Accept": accept})
    raise AssertionError(route)


ROUTES = ("raw", "json", "form", "haste", "fork")
CREATED = {"raw": 201, "json": 201, "form": 201, "haste": 200, "fork": 201}


class CreateAccessTest(SluiceTestCase):
    def start(self, mode, *extra, text=None):
        args = ["--create-access", mode, "--trusted-proxy", "127.0.0.1/32",
                "--forward-auth-header", USER_HEADER, "--create-networks", "10.0.0.0/8", *extra]
        if text is not None:
            args += ["--create-access-text", text]
        return self.server(args)

    def parent_of(self, s):
        """A paste to fork and to read, made by whoever this mode lets create."""
        for who in (INSIDER, NAMED):
            res = s.create(b"the parent\n", headers=who)
            if res.status == 201:
                return res.json()["id"]
        raise AssertionError("nobody could create the parent")

    def check_mode(self, mode):
        s = self.start(mode, text=OPERATOR_TEXT)
        parent = self.parent_of(s)
        for route in ROUTES:
            for name, who in CREATORS.items():
                with self.subTest(mode=mode, route=route, creator=name):
                    res = create_on(s, route, who, parent=parent)
                    refused = EXPECTED[mode][name]
                    if refused is None:
                        self.assertStatus(res, CREATED[route])
                        continue
                    doc = self.assertJsonError(res, refused, REASON[refused])
                    self.assertEqual(doc["error"], OPERATOR_TEXT)
                    if refused == 401:
                        self.assertEqual(res.header("WWW-Authenticate"), 'Bearer realm="sluice"')
        # Reads are public in every mode, to every creator.
        for name, who in CREATORS.items():
            with self.subTest(mode=mode, read=name):
                self.assertStatus(s.get(f"/raw/{parent}", headers=who), 200)
                self.assertStatus(s.get(f"/api/v1/pastes/{parent}", headers=who), 200)
                self.assertStatus(s.get(f"/{parent}", headers={**who, "Accept": BROWSER}), 200)
        limits = s.get("/api/v1/limits", headers=OUTSIDER)
        self.assertStatus(limits, 200)
        self.assertEqual(limits.json()["create_access"], mode)
        return s

    def test_anyone_creates_on_every_route(self):
        self.check_mode("anyone")

    def test_tokens_takes_only_a_named_creator_on_every_route(self):
        self.check_mode("tokens")

    def test_networks_takes_only_the_allowed_networks_on_every_route(self):
        self.check_mode("networks")

    def test_tokens_or_networks_takes_either_on_every_route(self):
        self.check_mode("tokens_or_networks")

    def test_the_default_is_anyone(self):
        s = self.server([])
        self.assertEqual(s.get("/api/v1/limits").json()["create_access"], "anyone")
        self.assertStatus(s.create(b"x"), 201)

    def test_a_refused_browser_reads_a_page_with_the_operators_text(self):
        s = self.start("networks", text="Ask <ops> & co")
        for route in ("form", "raw"):
            with self.subTest(route=route):
                res = create_on(s, route, OUTSIDER, accept=BROWSER)
                self.assertStatus(res, 403)
                self.assertTrue(res.header("Content-Type").startswith("text/html"))
                page = res.text
                self.assertIn("New pastes are not taken from this network", page)
                self.assertIn('<p id="access">Ask &lt;ops&gt; &amp; co</p>', page)
        s2 = self.start("tokens")
        res = create_on(s2, "form", OUTSIDER, accept=BROWSER)
        self.assertStatus(res, 401)
        self.assertIn("Creating pastes here needs access", res.text)
        # Without the operator's words, the default says what the mode takes.
        self.assertIn("only from creators who sign in", res.text)
        # And in the reader's language.
        res = create_on(s2, "form", {**OUTSIDER, "Accept-Language": "de"}, accept=BROWSER)
        self.assertIn("Zum Erstellen von Pastes braucht es hier Zugang", res.text)

    def test_forward_auth_is_honoured_only_from_a_trusted_proxy(self):
        trusted = self.server(["--create-access", "tokens", "--trusted-proxy", "127.0.0.1/32",
                               "--forward-auth-header", USER_HEADER])
        untrusted = self.server(["--create-access", "tokens",
                                 "--forward-auth-header", USER_HEADER])
        self.assertStatus(trusted.create(b"x", headers={USER_HEADER: "alice"}), 201)
        # The same header from a peer that is no trusted proxy is anyone's to write: ignored.
        self.assertJsonError(untrusted.create(b"x", headers={USER_HEADER: "alice"}), 401,
                             "create_access_credential")
        # And so is a proxy's header when the server was not told which header to read.
        plain = self.server(["--create-access", "tokens", "--trusted-proxy", "127.0.0.1/32"])
        self.assertJsonError(plain.create(b"x", headers={USER_HEADER: "alice"}), 401,
                             "create_access_credential")

    def test_a_junk_name_from_the_proxy_is_a_400_and_ignored_from_anyone_else(self):
        trusted = self.server(["--trusted-proxy", "127.0.0.1/32",
                               "--forward-auth-header", USER_HEADER])
        for junk in ("alice smith", "a" * 129, "alice,bob", "jos\u00e9".encode().decode("latin-1")):
            with self.subTest(junk=junk):
                self.assertJsonError(trusted.create(b"x", headers={USER_HEADER: junk}), 400,
                                     "bad_forwarded_user")
        # Two header fields are two names: refused, not one of them picked.
        res = trusted.create(b"x", headers=[(USER_HEADER, "alice"), (USER_HEADER, "bob")])
        self.assertJsonError(res, 400, "bad_forwarded_user")
        untrusted = self.server(["--forward-auth-header", USER_HEADER])
        self.assertStatus(untrusted.create(b"x", headers={USER_HEADER: "alice smith"}), 201)

    def test_a_name_has_its_own_bucket_inside_the_global_cap(self):
        # Two creates per key, five for the whole server, and nothing refills during the test.
        s = self.server(["--trusted-proxy", "127.0.0.1/32", "--forward-auth-header", USER_HEADER,
                         "--ip-create-rate", "0.0001", "--ip-create-burst", "2",
                         "--global-create-rate", "0.0001", "--global-create-burst", "5"])
        address = {"X-Forwarded-For": "203.0.113.7"}
        alice = {**address, USER_HEADER: "alice"}
        bob = {**address, USER_HEADER: "bob"}
        for _ in range(2):
            self.assertStatus(s.create(b"x", headers=alice), 201)
        self.assertJsonError(s.create(b"x", headers=alice), 429, "ip_create_count")
        # Another name behind the same address, and the address itself, still create.
        self.assertStatus(s.create(b"x", headers=bob), 201)
        self.assertStatus(s.create(b"x", headers=address), 201)
        # The limits a name sees are its own bucket's.
        limits = s.get("/api/v1/limits", headers=alice).json()
        self.assertEqual(limits["buckets"]["ip_create_count"]["available"], 0)
        # The global cap holds whatever the names: 5 created, so a new name is refused by it.
        self.assertStatus(s.create(b"x", headers=bob), 201)
        self.assertJsonError(s.create(b"x", headers={**address, USER_HEADER: "carol"}), 429,
                             "global_count")
        # The abuse view names the creator by its label.
        abuse = s.admin_request("GET", "/admin/abuse").json()["abuse"]
        keys = {row["key"] for row in abuse["top_keys"]}
        self.assertIn("user:alice", keys)
        self.assertIn("203.0.113.7", keys)

    def test_a_networks_file_reloads_on_sighup_without_failing_requests_in_flight(self):
        s0 = self.server([], start=False)
        path = os.path.join(s0.root, "create.netset")
        with open(path, "w") as f:
            f.write("# the office\n10.0.0.0/8\n")
        s0.args += ["--create-access", "networks", "--trusted-proxy", "127.0.0.1/32",
                    "--create-networks-file", path]
        s = s0.start()
        self.assertStatus(s.create(b"x", headers=INSIDER), 201)
        self.assertJsonError(s.create(b"x", headers=OUTSIDER), 403, "create_access_network")

        # Creates from inside, back to back, through the reload: every one must be a 201.
        statuses, stop = [], threading.Event()

        def insider_loop():
            while not stop.is_set():
                try:
                    statuses.append(s.create(b"in flight\n", headers=INSIDER).status)
                except Exception as e:  # noqa: BLE001 - a dropped request is the failure sought
                    statuses.append(type(e).__name__)

        worker = threading.Thread(target=insider_loop)
        worker.start()
        try:
            wait_until(lambda: len(statuses) >= 5, message="creates before the reload")
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write("10.0.0.0/8 ; the office\n203.0.113.0/24 # the new site\n")
            os.replace(tmp, path)
            before = metric(s.metrics(), "sluice_config_reloads_total", result="ok") or 0
            s.proc.send_signal(signal.SIGHUP)
            wait_until(lambda: (metric(s.metrics(), "sluice_config_reloads_total",
                                       result="ok") or 0) == before + 1,
                       message="the reload counted as ok")
            count = len(statuses)
            wait_until(lambda: len(statuses) >= count + 5, message="creates after the reload")
        finally:
            stop.set()
            worker.join()
        self.assertEqual(set(statuses), {201}, statuses)
        self.assertStatus(s.create(b"x", headers=OUTSIDER), 201)

        # A file that is no netset refuses the reload and keeps the list in use.
        with open(path, "w") as f:
            f.write("10.0.0.0/8\nnot a network\n")
        before = metric(s.metrics(), "sluice_config_reloads_total", result="invalid") or 0
        s.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: (metric(s.metrics(), "sluice_config_reloads_total",
                                   result="invalid") or 0) == before + 1,
                   message="the reload counted as invalid")
        self.assertStatus(s.create(b"x", headers=OUTSIDER), 201)
        self.assertIn("create_networks_file", s.log())

    def test_a_long_networks_file_is_read_off_the_event_loop(self):
        # One loop, which also takes the signal: before the reload's read moved to a thread of its
        # own (src/app/server_process.cc, Reload), a file of a million lines kept that loop from
        # answering anyone for 1.3 s. Probes sent after the signal and answered before the new
        # settings apply prove the loop answered while the file was read; a loop busy reading
        # answers at most one probe that raced the signal, and the rest after the apply.
        s0 = self.server([], start=False)
        path = os.path.join(s0.root, "create.netset")
        with open(path, "w") as f:
            f.write("10.0.0.0/8\n")
        s0.args += ["--threads", "1", "--create-access", "networks", "--trusted-proxy",
                    "127.0.0.1/32", "--create-networks-file", path]
        s = s0.start()
        with open(path + ".tmp", "w") as f:
            f.writelines(f"100.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}/32\n"
                         for i in range(600_000))
        os.replace(path + ".tmp", path)
        conn = s.raw()
        before = metric(s.metrics_from(conn), "sluice_config_reloads_total", result="ok") or 0
        s.proc.send_signal(signal.SIGHUP)
        answered_before_apply = 0
        give_up = time.monotonic() + 120
        while (metric(s.metrics_from(conn), "sluice_config_reloads_total", result="ok")
               or 0) != before + 1:
            self.assertLess(time.monotonic(), give_up, "the reload never applied")
            answered_before_apply += 1
        conn.close()
        self.assertGreaterEqual(answered_before_apply, 3)
        self.assertStatus(s.create(b"x", headers={"X-Forwarded-For": "100.0.1.2"}), 201)


if __name__ == "__main__":
    unittest.main()
