"""Creator tokens (issue 46, item 2; docs/admission.md, "Creator tokens"): `sluice admin token
create|list|revoke` through the admin listener; a create with `Authorization: Bearer TOKEN` on
every create route keyed by the token (its own buckets, not its address's, inside the global caps;
its label in the metrics and the heavy hitters); each `create_access` mode with a token; a wrong,
revoked or expired token answered 401 invalid_token, never taken as anonymous; the secret never in
a log line, a metric or a page; `sluice paste --token` and the CLI's config file.

The fleet's revocation on PostgreSQL is in test_creator_tokens_postgres.py.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_creator_tokens
"""

import json
import os
import shutil
import tempfile

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice, wait_until
from test_create_access import CREATED, ROUTES, create_on

# Every test client is 127.0.0.1; the address's budget is made tiny so that a token's own shows.
TINY_ADDRESS = ["--ip-create-rate", "0.001", "--ip-create-burst", "2"]
SECRET_PREFIX = "slt_"


def mint(s, label="ci", rate="1/h", burst="5", **more):
    """A token made through the admin listener: its JSON answer (with the secret)."""
    body = {"label": label, "rate": rate, "burst": burst, **more}
    res = s.admin_request("POST", "/admin/tokens", body=json.dumps(body),
                          headers={"Content-Type": "application/json"})
    assert res.status == 201, res
    doc = res.json()
    assert doc["secret"].startswith(SECRET_PREFIX), doc
    return doc


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


class CreatorTokensTest(SluiceTestCase):
    def test_a_token_creates_on_every_route_on_its_own_budget_not_its_addresses(self):
        s = self.server(TINY_ADDRESS)
        token = mint(s, burst=str(len(ROUTES) + 1))
        parent = s.create_ok(b"the parent\n")["id"]  # one of the address's two
        # The address's own bucket: one left, then 429.
        self.assertStatus(s.create(b"anonymous\n"), 201)
        self.assertJsonError(s.create(b"anonymous\n"), 429, "ip_create_count")
        # The token's: a burst of its own, on every route, from the same spent address.
        for route in ROUTES:
            with self.subTest(route=route):
                self.assertStatus(create_on(s, route, bearer(token["secret"]), parent=parent),
                                  CREATED[route])
        self.assertStatus(s.create(b"one more\n", headers=bearer(token["secret"])), 201)
        refused = s.create(b"over the token's burst\n", headers=bearer(token["secret"]))
        self.assertJsonError(refused, 429, "token_create_count")
        # Another token is another budget.
        other = mint(s, label="other", burst="1")
        self.assertStatus(s.create(b"other\n", headers=bearer(other["secret"])), 201)
        # Its label in the metrics and the heavy hitters, never its secret.
        created = metric(s.metrics(), "sluice_creator_token_creates_total", token="ci")
        self.assertEqual(created, len(ROUTES) + 1)
        abuse = s.admin_request("GET", "/admin/abuse")
        self.assertStatus(abuse, 200)
        self.assertIn(f"token:ci/{token['id']}", abuse.body.decode())

    def test_a_token_stays_inside_the_global_cap(self):
        s = self.server(["--global-create-rate", "0.001", "--global-create-burst", "3"])
        token = mint(s, burst="100")
        for i in range(3):
            self.assertStatus(s.create(f"{i}\n".encode(), headers=bearer(token["secret"])), 201)
        self.assertJsonError(s.create(b"past the cap\n", headers=bearer(token["secret"])), 429,
                             "global_count")

    def test_each_create_access_mode_takes_a_token_holder_as_it_takes_a_named_creator(self):
        expected = {"anyone": 201, "tokens": 201, "networks": 403, "tokens_or_networks": 201}
        for mode, status in expected.items():
            with self.subTest(mode=mode):
                s = self.server(["--create-access", mode, "--create-networks", "10.0.0.0/8"])
                token = mint(s)
                res = s.create(b"with a token\n", headers=bearer(token["secret"]))
                if status == 201:
                    self.assertStatus(res, 201)
                else:
                    self.assertJsonError(res, status, "create_access_network")
                s.stop()

    def test_a_token_not_in_force_is_refused_401_on_every_route_never_taken_as_anonymous(self):
        s = self.server()  # create_access = anyone: an anonymous create would be taken
        parent = s.create_ok(b"the parent\n")["id"]
        revoked = mint(s, label="gone")
        self.assertStatus(s.admin_request("DELETE", f"/admin/tokens/{revoked['id']}"), 204)
        expiring = mint(s, label="brief", expires="1s")
        wait_until(lambda: s.create(b"x\n", headers=bearer(expiring["secret"])).status == 401,
                   message="the token expired")
        unknown = SECRET_PREFIX + "A" * 43
        for name, secret in (("unknown", unknown), ("malformed", "not a token"),
                             ("revoked", revoked["secret"]), ("expired", expiring["secret"])):
            for route in ROUTES:
                with self.subTest(token=name, route=route):
                    res = create_on(s, route, bearer(secret), parent=parent)
                    doc = self.assertJsonError(res, 401, "invalid_token")
                    self.assertNotIn(secret, doc["error"])
                    self.assertEqual(res.header("WWW-Authenticate"),
                                     'Bearer realm="sluice", error="invalid_token"')
        # Two Authorization fields are refused too, even when one holds a good token.
        good = mint(s, label="good")
        conn = s.connection()
        conn.putrequest("POST", "/api/v1/pastes")
        conn.putheader("Authorization", f"Bearer {good['secret']}")
        conn.putheader("Authorization", "Bearer other")
        conn.putheader("Content-Length", "2")
        conn.endheaders(b"x\n")
        self.assertEqual(conn.getresponse().status, 401)
        conn.close()
        # Another scheme is not ours: a Basic header of a proxy in front changes nothing.
        self.assertStatus(s.create(b"basic\n", headers={"Authorization": "Basic dTpw"}), 201)
        self.assertGreaterEqual(metric(s.metrics(), "sluice_creator_token_refusals_total"), 20)

    def test_list_never_shows_a_secret_and_revoke_of_an_unknown_id_is_404(self):
        s = self.server()
        token = mint(s, label="ci", rate="10/s", burst="100", bytes_rate="1MB/s", expires="90d")
        listed = s.admin_request("GET", "/admin/tokens")
        self.assertStatus(listed, 200)
        self.assertNotIn(token["secret"], listed.body.decode())
        [row] = listed.json()["tokens"]
        self.assertEqual(row["id"], token["id"])
        self.assertEqual(row["label"], "ci")
        self.assertEqual(row["rate_per_second"], 10)
        self.assertEqual(row["burst"], 100)
        self.assertEqual(row["bytes_rate_per_second"], 1000000)
        self.assertTrue(row["in_force"])
        self.assertIsNone(row["revoked_at"])
        self.assertJsonError(s.admin_request("DELETE", "/admin/tokens/nosuch12"), 404)
        for bad in ({"label": "has space", "rate": "1/s", "burst": "1"},
                    {"label": "ci", "rate": "fast", "burst": "1"},
                    {"label": "ci", "rate": "1/s"},
                    {"label": "ci", "rate": "1/s", "burst": "1", "secret": "mine"}):
            with self.subTest(bad=bad):
                res = s.admin_request("POST", "/admin/tokens", body=json.dumps(bad),
                                      headers={"Content-Type": "application/json"})
                self.assertJsonError(res, 400)

    def test_the_cap_on_tokens_refuses_one_more(self):
        s = self.server(["--max-creator-tokens", "1"])
        mint(s)
        res = s.admin_request("POST", "/admin/tokens",
                              body=json.dumps({"label": "two", "rate": "1/s", "burst": "1"}),
                              headers={"Content-Type": "application/json"})
        self.assertJsonError(res, 507, "creator_tokens_full")

    def test_the_secret_is_never_in_a_log_line_a_metric_or_a_page(self):
        s = self.server(["--access-log", "true", "--log-level", "debug"])
        token = mint(s)
        secret = token["secret"]
        created = s.create_ok(b"with a token\n", headers=bearer(secret))
        s.create(b"x\n", headers=bearer(secret[:-1] + "A"))  # a wrong one, logged as refused
        self.assertStatus(s.admin_request("DELETE", f"/admin/tokens/{token['id']}"), 204)
        s.create(b"x\n", headers=bearer(secret))  # revoked
        pages = [s.get("/metrics").text, s.get("/api/v1/status").text,
                 s.get("/status", headers={"Accept": "text/html"}).body.decode(),
                 s.get(f"/{created['id']}", headers={"Accept": "text/html"}).body.decode(),
                 s.admin_request("GET", "/status").body.decode(),
                 s.admin_request("GET", "/admin/abuse").body.decode(),
                 s.admin_request("GET", "/admin/tokens").body.decode(),
                 s.admin_request("GET", "/metrics").body.decode()]
        s.stop()
        # The secret's random part, so that no encoding of the prefix hides it.
        needle = secret[len(SECRET_PREFIX):]
        for i, text in enumerate(pages + [s.log()]):
            with self.subTest(page=i):
                self.assertNotIn(needle, text)
        self.assertIn('token="ci"', pages[0])

    def test_the_cli_sends_a_token_from_the_flag_or_only_to_its_configs_server(self):
        s = self.server(TINY_ADDRESS)
        home = tempfile.mkdtemp(prefix="sluice-cli-")
        self.addCleanup(shutil.rmtree, home, ignore_errors=True)
        env = {"XDG_STATE_HOME": home, "XDG_CONFIG_HOME": home, "HOME": home}
        admin = ["admin", "--admin", f"http://127.0.0.1:{s.admin_port}", "--token-file",
                 s.admin_token_file]
        made = run_sluice([*admin, "token", "create", "--label", "cli", "--rate", "1/h",
                           "--burst", "10"], env=env)
        self.assertEqual(made.returncode, 0, made.stderr)
        token = json.loads(made.stdout)
        secret = token["secret"]
        listed = run_sluice([*admin, "token", "list"], env=env)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertNotIn(secret, listed.stdout)
        self.assertIn(token["id"], listed.stdout)
        # Spend the address's budget, then create with the token three ways.
        for _ in range(2):
            s.create(b"anonymous\n")
        note = os.path.join(home, "note.txt")
        with open(note, "w") as f:
            f.write("from the CLI\n")
        paste = ["paste", note, "--server", s.url, "--max-wait", "0"]
        no_token = run_sluice(paste, env=env, timeout=30)
        self.assertNotEqual(no_token.returncode, 0)
        by_flag = run_sluice([*paste, "--token", secret], env=env, timeout=30)
        self.assertEqual(by_flag.returncode, 0, by_flag.stderr)
        by_env = run_sluice(paste, env={**env, "SLUICE_TOKEN": secret}, timeout=30)
        self.assertEqual(by_env.returncode, 0, by_env.stderr)
        os.makedirs(os.path.join(home, "sluice"), exist_ok=True)
        with open(os.path.join(home, "sluice", "cli.toml"), "w") as f:
            f.write(f'server = "{s.url}"\ntoken = "{secret}"\n')
        by_config = run_sluice(["paste", note, "--max-wait", "0"], env=env, timeout=30)
        self.assertEqual(by_config.returncode, 0, by_config.stderr)
        # The config's token goes to the config's server only: the same server named another
        # way (localhost) is another origin, and gets no token.
        elsewhere = run_sluice(["paste", note, "--max-wait", "0", "--server",
                                f"http://localhost:{s.port}"], env=env, timeout=30)
        self.assertNotEqual(elsewhere.returncode, 0)
        self.assertIn("ip_create_count", elsewhere.stderr)
        self.assertEqual(metric(s.metrics(), "sluice_creator_token_creates_total", token="cli"), 3)
        revoked = run_sluice([*admin, "token", "revoke", token["id"]], env=env)
        self.assertEqual(revoked.returncode, 0, revoked.stderr)
        after = run_sluice([*paste, "--token", secret], env=env, timeout=30)
        self.assertNotEqual(after.returncode, 0)
        self.assertIn("401", after.stderr)
