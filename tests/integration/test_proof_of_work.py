"""Proof of work as a rung (docs/overload.md, "Proof of work"): a flood of many addresses, each
under its own limit, spends the global create budget; without the rung every honest creator then
gets a flat 429, with it a creator that solves (`sluice paste`, or this file's own solver in
Python's hashlib, which shares no code with the server) gets through on the solvers' share, while
replays, forgeries and non-solvers stay refused.

The global budget refills at 0.01/s, so what each step spends is decided by counts, not by how
fast this machine runs the test.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_proof_of_work
"""

import base64
import hashlib
import json
import os
import subprocess
import tempfile
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, clean_env, sluice_bin

BOTS = [f"198.18.{n // 200}.{n % 200 + 1}" for n in range(60)]
HONEST = "203.0.113.7"
# 20 creates in the global burst: 16 for everyone else and 4 kept for solvers (a share of 0.2).
FLOOD = ["--trusted-proxy", "127.0.0.1", "--global-create-rate", "0.01",
         "--global-create-burst", "20", "--ip-create-rate", "1", "--ip-create-burst", "10"]


def solve(challenge):
    """ALTCHA's search: the number whose SHA-256 with the salt is the challenge."""
    for n in range(challenge["maxnumber"] + 1):
        if hashlib.sha256(f"{challenge['salt']}{n}".encode()).hexdigest() == challenge["challenge"]:
            return n
    raise AssertionError("no solution up to maxnumber")


def payload(challenge, number):
    fields = {k: challenge[k] for k in ("algorithm", "challenge", "salt", "signature")}
    fields["number"] = number
    return base64.b64encode(json.dumps(fields).encode()).decode()  # as a browser's btoa


class FloodTestCase(SluiceTestCase):
    def create(self, client, text="a paste", proof=None, query=""):
        headers = {"X-Forwarded-For": client}
        if proof:
            headers["Sluice-Proof"] = proof
        return self.s.request("POST", f"/api/v1/pastes{query}", body=text, headers=headers)

    def flood(self):
        """Each bot sends one create, well under its own limit, until the global budget is
        spent; returns how many got through."""
        return sum(self.create(bot).status == 201 for bot in BOTS)


class WithoutTheRungTest(FloodTestCase):
    def test_a_flood_leaves_every_honest_creator_a_flat_429(self):
        self.s = self.server(FLOOD)
        self.assertEqual(self.flood(), 20)
        res = self.create(HONEST)
        self.assertStatus(res, 429)
        self.assertEqual(res.json()["reason"], "global_count")
        self.assertNotIn("challenge", res.json())
        self.assertNotIn("proof_of_work", self.s.get("/api/v1/limits").json())


class WithTheRungTest(FloodTestCase):
    def setUp(self):
        super().setUp()
        self.s = self.server([*FLOOD, "--proof-of-work", "true", "--proof-of-work-share", "0.2",
                              "--proof-of-work-difficulty", "5000"])
        # The bots' 16 get through; the rest are refused, each with a challenge they ignore.
        self.assertEqual(self.flood(), 16)

    def challenge(self, client=HONEST):
        res = self.create(client)
        self.assertStatus(res, 429)
        self.assertEqual(res.json()["reason"], "global_count")
        return res.json()["challenge"]

    def test_a_solver_gets_through_and_a_non_solver_does_not(self):
        challenge = self.challenge()
        self.assertEqual(challenge["algorithm"], "SHA-256")
        self.assertEqual(challenge["maxnumber"], 5000)
        proof = payload(challenge, solve(challenge))
        self.assertStatus(self.create(HONEST, "solved", proof), 201)
        # The same solution again buys nothing: refused with a new challenge to solve.
        again = self.create(HONEST, "replayed", proof)
        self.assertStatus(again, 429)
        self.assertEqual(again.json()["reason"], "proof_replayed")
        self.assertIn("challenge", again.json())
        self.assertStatus(self.create(HONEST, "not solved"), 429)
        m = self.s.metrics()
        self.assertEqual(metric(m, "sluice_pow_challenges_total", outcome="valid"), 1)
        self.assertEqual(metric(m, "sluice_pow_challenges_total", outcome="replayed"), 1)

    def test_the_solvers_share_is_bounded_and_its_difficulty_rises_as_it_drains(self):
        made, refused, maxnumbers = 0, 0, []
        for n in range(8):
            challenge = self.challenge(f"192.0.2.{n + 1}")
            maxnumbers.append(challenge["maxnumber"])
            res = self.create(f"192.0.2.{n + 1}", f"solver {n}", payload(challenge, solve(challenge)))
            if res.status == 201:
                made += 1
            else:
                self.assertEqual(res.json()["reason"], "solver_count")
                refused += 1
        # 4 kept for solvers; the flood's refusals took none of them.
        self.assertEqual((made, refused), (4, 4))
        self.assertEqual(maxnumbers[0], 5000)
        self.assertEqual(maxnumbers[-1], 40000)
        self.assertEqual(sorted(maxnumbers), maxnumbers)

    def test_forged_wrong_and_malformed_solutions_are_400(self):
        challenge = self.challenge()
        number = solve(challenge)
        wrong = payload(challenge, number + 1)
        forged = payload({**challenge, "signature": "0" * 64}, number)
        for proof in (wrong, forged, "not-a-proof", "A" * 4000):
            res = self.create(HONEST, "x", proof)
            self.assertStatus(res, 400)
            self.assertEqual(res.json()["reason"], "invalid_proof")
        # In the query, as a browser's form sends it, the same checks hold.
        def url_safe(p):
            return p.replace("+", "-").replace("/", "_").rstrip("=")
        res = self.create(HONEST, "x", query=f"?proof={url_safe(wrong)}")
        self.assertStatus(res, 400)
        res = self.create(HONEST, "from a form", query=f"?proof={url_safe(payload(challenge, number))}")
        self.assertStatus(res, 201)

    def test_a_page_learns_of_the_challenge_before_it_sends(self):
        limits = self.s.get("/api/v1/limits", headers={"X-Forwarded-For": HONEST}).json()
        self.assertTrue(limits["proof_of_work"]["asked"])
        challenge = limits["proof_of_work"]["challenge"]
        self.assertStatus(self.create(HONEST, "early", payload(challenge, solve(challenge))), 201)

    def test_sluice_paste_solves_without_being_asked(self):
        # From 127.0.0.1 itself, whose own budget the flood left alone.
        res = subprocess.run([sluice_bin(), "paste", "--server", self.s.base_url, "--max-wait",
                              "30s"], input="from the command line\n", capture_output=True,
                             text=True, env=clean_env(), timeout=60)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("solving its proof of work", res.stderr)
        paste_id = res.stdout.split()[0].rsplit("/", 1)[1]
        self.assertEqual(self.s.get(f"/raw/{paste_id}").body, b"from the command line\n")


class ChallengeFeedTest(FloodTestCase):
    def test_a_challenge_feeds_networks_solve_for_every_create(self):
        with tempfile.NamedTemporaryFile("w", suffix=".netset", delete=False) as f:
            f.write("# a datacenter's ranges\n192.0.2.0/24\n")
        self.addCleanup(os.unlink, f.name)
        self.s = self.server(["--trusted-proxy", "127.0.0.1", "--proof-of-work", "true",
                              "--proof-of-work-difficulty", "2000",
                              "--feeds", f"cloud=challenge:{f.name}"])
        # The budget is full: only the listed network is asked, and a page from it learns that
        # before it sends (the browser's form solves first, web/static/app.js).
        limits = lambda client: self.s.get(  # noqa: E731
            "/api/v1/limits", headers={"X-Forwarded-For": client}).json()["proof_of_work"]
        self.assertFalse(limits(HONEST)["asked"])
        self.assertTrue(limits("192.0.2.9")["asked"])
        self.assertIn("challenge", limits("192.0.2.9"))
        self.assertStatus(self.create(HONEST), 201)
        res = self.create("192.0.2.9")
        self.assertStatus(res, 429)
        self.assertEqual(res.json()["reason"], "feed_challenge")
        challenge = res.json()["challenge"]
        self.assertStatus(self.create("192.0.2.9", "solved", payload(challenge, solve(challenge))),
                          201)
        self.assertStatus(self.create("192.0.2.9", "again, unsolved"), 429)


if __name__ == "__main__":
    unittest.main()
