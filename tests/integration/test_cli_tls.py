"""The CLI over https:// (docs/sharing.md, "The command line"): paste, get, list and delete through
a TLS front with a throwaway CA trusted as the system's store would be (SSL_CERT_FILE, which
OpenSSL's default paths honour); a certificate for another name, or from a CA the system does not
trust, is refused before anything is sent.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_cli_tls
"""

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest

from loopback_server import LoopbackServer
from sluice_harness import SluiceTestCase, clean_env, sluice_bin


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(folder, name):
    """A CA and a certificate it signed for DNS:`name`; returns (ca.crt, server.crt, server.key)."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            "/CN=sluice test CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=folder)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout",
            "server.key", "-out", "server.csr", cwd=folder)
    with open(os.path.join(folder, "san.ext"), "w") as f:
        f.write(f"subjectAltName = DNS:{name}\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "1", "-extfile", "san.ext", "-out", "server.crt",
            cwd=folder)
    return tuple(os.path.join(folder, f) for f in ("ca.crt", "server.crt", "server.key"))


class TlsFront(LoopbackServer):
    """Terminates TLS on 127.0.0.1 and relays each connection to `backend_port`."""

    def __init__(self, cert, key, backend_port):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.backend_port = backend_port
        super().__init__(threaded=True)

    def handle(self, conn):
        try:
            conn.settimeout(10)
            tls = self.ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            conn.close()  # the client refused our certificate: the point of two tests
            return
        backend = socket.create_connection(("127.0.0.1", self.backend_port))

        def pump(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        t = threading.Thread(target=pump, args=(backend, tls), daemon=True)
        t.start()
        pump(tls, backend)
        t.join(timeout=10)
        tls.close()
        backend.close()


class CliOverTlsTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="sluice-cli-tls-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.ca, cert, key = make_ca(self.dir, "localhost")
        self.s = self.server()
        self.front = TlsFront(cert, key, int(self.s.url.rsplit(":", 1)[1]))
        self.addCleanup(self.front.stop)

    def run_cli(self, args, ca=None, stdin=b""):
        env = {"XDG_STATE_HOME": self.dir}
        if ca:
            env["SSL_CERT_FILE"] = ca
        proc = subprocess.run([sluice_bin(), *args], input=stdin, capture_output=True,
                              env=clean_env(env), timeout=60)
        proc.stdout = proc.stdout.decode("utf-8", "replace")
        proc.stderr = proc.stderr.decode("utf-8", "replace")
        return proc

    def test_paste_get_list_delete_over_https_with_a_trusted_ca(self):
        server = f"https://localhost:{self.front.port}"
        made = self.run_cli(["paste", "--server", server], ca=self.ca, stdin=b"over tls\n")
        self.assertEqual(made.returncode, 0, made.stderr)
        url = made.stdout.strip()
        paste_id = url.rsplit("/", 1)[1]
        self.assertStatus(self.s.get(f"/raw/{paste_id}"), 200)
        # The server's links are its own (plain here); get and delete talk to the front.
        front_url = f"{server}/{paste_id}"
        got = self.run_cli(["get", front_url], ca=self.ca)
        self.assertEqual((got.returncode, got.stdout), (0, "over tls\n"), got.stderr)
        self.assertIn(paste_id, self.run_cli(["list"]).stdout)
        gone = self.run_cli(["delete", front_url], ca=self.ca)
        self.assertEqual(gone.returncode, 0, gone.stderr)
        self.assertStatus(self.s.get(f"/raw/{paste_id}"), 404)

    def test_a_certificate_for_another_name_is_refused_before_anything_is_sent(self):
        made = self.run_cli(["paste", "--server", f"https://127.0.0.1:{self.front.port}"],
                            ca=self.ca, stdin=b"never sent\n")
        self.assertEqual(made.returncode, 1)
        self.assertIn("TLS handshake failed", made.stderr)
        self.assertIn("nothing was sent", made.stderr)
        got = self.run_cli(["get", f"https://127.0.0.1:{self.front.port}/AAAAAAAAAAAA"], ca=self.ca)
        self.assertEqual(got.returncode, 1)
        self.assertIn("TLS handshake failed", got.stderr)

    def test_an_unknown_ca_is_refused(self):
        other = os.path.join(self.dir, "other")
        os.mkdir(other)
        other_ca, _, _ = make_ca(other, "localhost")
        made = self.run_cli(["paste", "--server", f"https://localhost:{self.front.port}"],
                            ca=other_ca, stdin=b"never sent\n")
        self.assertEqual(made.returncode, 1)
        self.assertIn("TLS handshake failed", made.stderr)


if __name__ == "__main__":
    unittest.main()
