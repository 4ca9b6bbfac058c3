"""sluice on a PostgreSQL reached as a managed one is: TLS only, the server's certificate checked
against a CA and a host name (sslmode=verify-full), a password. The server is Debian's PostgreSQL
started by scripts/testenv/postgres.sh start-tls with a throwaway CA; nothing here is mocked.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_postgres_tls
"""

import os
import shutil
import subprocess
import tempfile
import unittest
from urllib.parse import quote

from sluice_harness import SluiceTestCase, run_sluice
from test_postgres import PostgresServer

RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "2s", "--read-budget", "5s"]


class PostgresOverTlsTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer(tls=True)
        cls.port = cls.pg.url.split("@localhost:")[1].split("/")[0]
        cls.ca = os.path.join(cls.pg.dir, "ca.pem")

    @classmethod
    def tearDownClass(cls):
        cls.pg.stop()

    def url(self, host="localhost", password=None, ca=None):
        user = "postgres" + (f":{quote(password, safe='')}" if password else "")
        return (f"postgres://{user}@{host}:{self.port}/sluice"
                f"?sslmode=verify-full&sslrootcert={ca or self.ca}")

    def test_pastes_round_trip_over_a_verified_connection_with_the_password_from_pgpassword(self):
        s = self.server(["--meta", self.url(), *RELAXED], env={"PGPASSWORD": self.pg.password})
        doc = s.create_ok(b"over tls")
        res = s.get(f"/raw/{doc['id']}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, b"over tls")
        # Every connection the server holds is encrypted: none can be plain, pg_hba refuses those.
        ssl = self.pg.sql("SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s "
                          "JOIN pg_stat_activity a USING (pid) WHERE a.datname = 'sluice' "
                          "AND a.pid <> pg_backend_pid()")
        encrypted, total = (int(n) for n in ssl.split("|"))
        self.assertGreater(total, 0)
        self.assertEqual(encrypted, total)

    def test_a_password_in_the_url_works_and_never_reaches_the_log(self):
        s = self.server(["--meta", self.url(password=self.pg.password), *RELAXED])
        doc = s.create_ok(b"secret kept")
        self.assertStatus(s.get(f"/raw/{doc['id']}"), 200)
        s.stop()
        # The harness heads the log with the command line it ran; what sluice wrote follows.
        written = "\n".join(line for line in s.log().splitlines()
                            if not line.startswith("===== start"))
        self.assertNotIn(self.pg.password, written)
        self.assertIn("postgres://postgres:***@localhost", written)

    def refused_at_start(self, meta_url, env=None):
        data_dir = tempfile.mkdtemp(prefix="sluice-pgtls-")
        self.addCleanup(shutil.rmtree, data_dir, True)
        res = run_sluice(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                          "--data-dir", data_dir, "--meta", meta_url], env=env, timeout=60)
        output = res.stdout + res.stderr
        self.assertEqual(res.returncode, 2, output)
        return output

    def test_a_certificate_for_another_name_is_refused_at_start(self):
        output = self.refused_at_start(self.url(host="127.0.0.1"),
                                       env={"PGPASSWORD": self.pg.password})
        self.assertIn('does not match host name "127.0.0.1"', output)

    def test_a_certificate_from_an_untrusted_ca_is_refused_at_start(self):
        other = tempfile.mkdtemp(prefix="sluice-otherca-")
        self.addCleanup(shutil.rmtree, other)
        other_ca = os.path.join(other, "ca.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=not the server's CA", "-keyout",
                        os.path.join(other, "ca.key"), "-out", other_ca],
                       check=True, capture_output=True, timeout=60)
        output = self.refused_at_start(self.url(ca=other_ca), env={"PGPASSWORD": self.pg.password})
        self.assertIn("certificate verify failed", output)

    def test_a_wrong_password_is_refused_at_start_without_echoing_it(self):
        output = self.refused_at_start(self.url(password="not-the-password-x9"))
        self.assertIn("password authentication failed", output)
        self.assertNotIn("not-the-password-x9", output)


if __name__ == "__main__":
    unittest.main()
