"""The CLI beyond paste (docs/sharing.md, "The command line"): paste with --lang guessed from
the file name, --burn and --max-views; get, list and delete against the real binary; the token
file's mode; a 429 on get waited out by its Retry-After.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_cli_share
"""

import os
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

from sluice_harness import SluiceTestCase, clean_env, sluice_bin
from test_paste_client import FakeServer


class CliShareTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.state = tempfile.mkdtemp(prefix="sluice-cli-state-")
        self.addCleanup(shutil.rmtree, self.state, ignore_errors=True)

    def run_cli(self, args, server=None, stdin=b"", timeout=60):
        env = {"XDG_STATE_HOME": self.state, "XDG_CONFIG_HOME": self.state}
        if server:
            env["SLUICE_SERVER"] = server
        proc = subprocess.run([sluice_bin(), *args], input=stdin, capture_output=True,
                              env=clean_env(env), timeout=timeout)
        proc.stdout = proc.stdout.decode("utf-8", "replace")
        proc.stderr = proc.stderr.decode("utf-8", "replace")
        return proc

    def test_paste_get_list_delete_round_trip_with_the_token_file_private(self):
        s = self.server()
        path = os.path.join(self.state, "hello.py")
        with open(path, "w") as f:
            f.write("print('hello')\n")
        made = self.run_cli(["paste", path], server=s.url)
        self.assertEqual(made.returncode, 0, made.stderr)
        url = made.stdout.strip()
        self.assertTrue(url.endswith(".py"), url)  # the language guessed from the file name
        tokens = os.path.join(self.state, "sluice", "pastes")
        self.assertEqual(stat.S_IMODE(os.stat(tokens).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(tokens)).st_mode), 0o700)

        got = self.run_cli(["get", url])
        self.assertEqual((got.returncode, got.stdout), (0, "print('hello')\n"), got.stderr)
        for form in (url[:-3], url[:-3] + "?lang=text", url.replace(url[-15:], "raw/" + url[-15:-3])):
            self.assertEqual(self.run_cli(["get", form]).stdout, "print('hello')\n", form)

        listed = self.run_cli(["list"])
        self.assertEqual(listed.returncode, 0)
        self.assertIn(url, listed.stdout)
        self.assertIn("expires 20", listed.stdout)

        gone = self.run_cli(["delete", url])
        self.assertEqual(gone.returncode, 0, gone.stderr)
        self.assertStatus(s.get(f"/raw/{url[-15:-3]}"), 404)
        self.assertNotIn(url, self.run_cli(["list"]).stdout)
        self.assertEqual(self.run_cli(["delete", url]).returncode, 1)  # no token any more
        self.assertEqual(self.run_cli(["get", url]).returncode, 1)

    def test_burn_and_max_views_are_claimed_not_read(self):
        s = self.server()
        made = self.run_cli(["paste", "--max-views", "2", "--lang", "text"], server=s.url,
                            stdin=b"twice\n")
        self.assertEqual(made.returncode, 0, made.stderr)
        paste_id = made.stdout.strip().rsplit("/", 1)[1][:12]
        got = self.run_cli(["get", made.stdout.strip()])
        self.assertEqual(got.returncode, 1)
        self.assertIn("limited number of times", got.stderr)
        for _ in range(2):
            self.assertStatus(s.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b""), 200)
        self.assertStatus(s.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b""), 404)
        burn = self.run_cli(["paste", "--burn"], server=s.url, stdin=b"once\n")
        burn_id = burn.stdout.strip().rsplit("/", 1)[1][:12]
        self.assertStatus(s.request("POST", f"/api/v1/pastes/{burn_id}/claim", body=b""), 200)
        self.assertStatus(s.request("POST", f"/api/v1/pastes/{burn_id}/claim", body=b""), 404)
        self.assertEqual(self.run_cli(["paste", "--max-views", "0"], server=s.url,
                                      stdin=b"x").returncode, 105)  # CLI11's range refusal

    def test_a_429_on_get_is_waited_out_by_its_retry_after(self):
        fake = FakeServer([(429, {"Retry-After": "1"}, '{"error": "slow down", "reason": "x"}'),
                           (200, {}, "the text\n")])
        self.addCleanup(fake.stop)
        started = time.monotonic()
        got = self.run_cli(["get", f"{fake.url}/AAAAAAAAAAAA"])
        took = time.monotonic() - started
        self.assertEqual((got.returncode, got.stdout), (0, "the text\n"), got.stderr)
        self.assertIn("server busy (429), retrying in", got.stderr)
        self.assertGreater(took, 0.9)
        self.assertEqual([r[0] for r in fake.requests], ["GET /raw/AAAAAAAAAAAA HTTP/1.1"] * 2)

    def test_the_config_file_names_the_server_when_no_flag_or_variable_does(self):
        s = self.server()
        os.makedirs(os.path.join(self.state, "sluice"), exist_ok=True)
        config = os.path.join(self.state, "sluice", "cli.toml")
        with open(config, "w") as f:
            f.write(f'server = "{s.url}"\n')
        made = self.run_cli(["paste"], stdin=b"configured\n")
        self.assertEqual(made.returncode, 0, made.stderr)
        self.assertTrue(made.stdout.startswith(s.url), made.stdout)
        # The variable wins over the file (and names a server that is not there).
        other = self.run_cli(["paste"], server="http://127.0.0.1:9", stdin=b"x\n")
        self.assertEqual(other.returncode, 1)
        self.assertIn("127.0.0.1:9", other.stderr)
        with open(config, "w") as f:
            f.write("server = 42\n")
        bad = self.run_cli(["paste"], stdin=b"x\n")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("cli.toml", bad.stderr)

    def test_completions_come_from_the_declarations_and_parse(self):
        bash = self.run_cli(["completions", "bash"])
        self.assertEqual(bash.returncode, 0, bash.stderr)
        for word in ("paste", "get", "delete", "list", "--max-views", "--burn", "--lang"):
            self.assertIn(word, bash.stdout)
        checked = subprocess.run(["bash", "-n"], input=bash.stdout.encode(), capture_output=True)
        self.assertEqual(checked.returncode, 0, checked.stderr)
        zsh = self.run_cli(["completions", "zsh"])
        self.assertTrue(zsh.stdout.startswith("#compdef sluice\n"), zsh.stdout[:80])
        self.assertNotEqual(self.run_cli(["completions", "fish"]).returncode, 0)
        man = self.run_cli(["man"]).stdout
        for command in ("get", "delete", "list", "completions"):
            self.assertIn(f"sluice {command}", man.replace("\\-", "-"))


if __name__ == "__main__":
    unittest.main()
