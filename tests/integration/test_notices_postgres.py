"""Notice intake on PostgreSQL (docs/moderation.md, "Notices"): test_notices.py's scenarios against
a server whose metadata store is a PostgreSQL started by scripts/testenv/postgres.sh (as
test_postgres.py does), and a notice taken through one process withholding the paste on another
sharing the store.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_notices_postgres
"""

import json

from sluice_harness import SluiceTestCase
from test_notices import JSON, NoticeScenarios
from test_postgres import PostgresServer


class NoticesPostgresTest(NoticeScenarios, SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    def setUp(self):
        super().setUp()
        # The class shares one database: each test starts without notices (the schema kept).
        self.pg.sql("DO $$ BEGIN IF to_regclass('notices') IS NOT NULL THEN "
                    "TRUNCATE notices, notice_pastes; END IF; END $$")

    def server_args(self):
        return ["--meta", self.pg.url]

    def test_a_notice_through_one_process_withholds_on_the_other(self):
        a = self.start()
        b = self.start()
        paste_id = a.create_ok("read through b")["id"]
        body = {"sender": "abuse@hoster.example", "reference": "FLEET-1", "pastes": [paste_id]}
        res = a.admin_request("POST", "/admin/notices", body=json.dumps(body), headers=JSON)
        self.assertStatus(res, 201)
        # b reads the row from the shared store: 451 at once.
        self.assertJsonError(b.get(f"/raw/{paste_id}"), 451, "withheld_notice")
        again = b.admin_request("POST", "/admin/notices", body=json.dumps(body), headers=JSON)
        self.assertStatus(again, 200)
        self.assertEqual(again.json()["notice"]["id"], res.json()["notice"]["id"])
