"""Creator tokens across a fleet (issue 46, item 2; docs/admission.md, "Creator tokens"): two
sluice processes sharing one PostgreSQL (started by scripts/testenv/postgres.sh, as
test_postgres.py does). A token made through one process is taken by the other once it polled,
and a revocation through the first is refused by the second within the stated time,
creator_tokens_refresh plus one store call.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_creator_tokens_postgres
"""

import time

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until, with_write_pool_warm
from test_creator_tokens import bearer, mint
from test_postgres import PostgresServer

REFRESH_SECONDS = 1
# The stated time is REFRESH_SECONDS plus one store call; the slack is for a loaded test machine,
# whose scheduler may hold a process for seconds, not for the design.
SLACK_SECONDS = 10


class CreatorTokensFleetTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    def fleet_member(self):
        s = self.server(["--meta", self.pg.url, "--insert-timeout", "2s", "--meta-get-timeout",
                         "2s", "--creator-tokens-refresh", f"{REFRESH_SECONDS}s"])
        return with_write_pool_warm(s)

    def test_a_revocation_through_one_process_is_refused_by_the_other_within_the_refresh(self):
        a = self.fleet_member()
        b = self.fleet_member()
        token = mint(a, burst="1000")
        # b learns of the token at its next poll: its gauge says so, then a create proves it.
        wait_until(lambda: metric(b.metrics(), "sluice_creator_tokens") >= 1,
                   timeout=REFRESH_SECONDS + SLACK_SECONDS, message="b read the token")
        self.assertStatus(b.create(b"through b\n", headers=bearer(token["secret"])), 201)
        revoked_at = time.monotonic()
        self.assertStatus(a.admin_request("DELETE", f"/admin/tokens/{token['id']}"), 204)
        # Through a, at once (it reread the tokens in its own revocation).
        self.assertJsonError(a.create(b"x\n", headers=bearer(token["secret"])), 401,
                             "invalid_token")
        wait_until(lambda: b.create(b"x\n", headers=bearer(token["secret"])).status == 401,
                   timeout=REFRESH_SECONDS + SLACK_SECONDS, interval=0.1,
                   message="b refuses the revoked token")
        took = time.monotonic() - revoked_at
        print(f"revocation reached the second process in {took:.2f} s "
              f"(creator_tokens_refresh {REFRESH_SECONDS} s)")
