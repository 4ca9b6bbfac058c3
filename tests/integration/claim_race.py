"""What the burn and the N-view races on PostgreSQL share (test_burn.py, test_max_views.py): one
PostgreSQL for the class, two sluice processes on it sharing one blob folder, and a claimer that
waits at a barrier so that all of them ask at once."""

import shutil
import tempfile

from sluice_harness import SluiceTestCase
from test_postgres import PostgresServer


def claim(server, paste_id, results, index, start):
    start.wait()
    results[index] = server.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b"",
                                    timeout=30)


class ClaimRaceOnPostgres(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    # Sized for a shared, noisy test machine: fifty claims at once queue on one row lock and open
    # connections on demand; what is checked is who wins, not how fast.
    RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "5s", "--read-budget", "5s",
               "--delete-budget", "20s", "--blob-get-timeout", "5s"]

    def two_processes(self):
        """Two servers on the class's PostgreSQL, their bodies in one shared folder."""
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        return tuple(self.server(["--meta", self.pg.url, *self.RELAXED], data_dir=shared_blobs)
                     for _ in range(2))
