"""The fleet's compose file (deploy/compose/compose.yaml) run by Debian's podman-compose: two sluice
containers of the build under test behind nginx, PostgreSQL and Redis from the services image
(`make image-services`), bodies in a shared volume. Up; create and read through nginx; one sluice
container killed while creates run from a few threads, and the other keeps acknowledging them;
every acknowledged (201) paste reads back; `down` keeps the volumes, and a second `up` reads the
old pastes.

SLUICE_COMPOSE_IMAGE names an image to use instead of building one from SLUICE_BIN's build.
"""

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from podman_harness import (REPO, Http, build_image, podman, podman_env,  # noqa: E402
                            require_podman, run, ulimit_args, wait_until)

COMPOSE_FILE = os.path.join(REPO, "deploy", "compose", "compose.yaml")
THREADS = 4
# Creates acknowledged before the kill, and after it (by the process left).
BEFORE_KILL = 40
AFTER_KILL = 80
# The image's HEALTHCHECK command (podman-compose's containers, with their entrypoint replaced,
# do not carry it): /healthz on the process's own port, with bash since the image has no client.
PROBE = ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && "
         "printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && "
         "read -r status <&3 && [[ $status == *' 200 '* ]]"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ComposeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_podman("podman-compose")
        cls.image = os.environ.get("SLUICE_COMPOSE_IMAGE")
        if not cls.image:
            cls.image, built = build_image()
            print(f"\n{built}", file=sys.stderr)
        # The base is kept between runs (keyed by its packages): a warm run only tags it.
        services = run([os.path.join(REPO, "scripts", "build-image.sh"), "services"],
                       env=podman_env(), cwd=REPO, timeout=1800, check=True)
        print(services.stdout.strip().splitlines()[-1], file=sys.stderr)

        cls.project = f"sluicecompose{uuid.uuid4().hex[:8]}"
        cls.secrets = tempfile.mkdtemp(prefix="sluice-compose-secrets-")
        # The services read their secret as their own users (postgres, redis, sluice): the files
        # are bind-mounted as they are.
        os.chmod(cls.secrets, 0o755)
        for name in ("db_password", "redis_password", "admin_token"):
            path = os.path.join(cls.secrets, name)
            with open(path, "w") as f:
                f.write(uuid.uuid4().hex + "\n")
            os.chmod(path, 0o644)
        cls.port = free_port()
        cls.http = Http(cls.port)
        cls.addClassCleanup(shutil.rmtree, cls.secrets, ignore_errors=True)
        # `down` leaves the project's network.
        cls.addClassCleanup(podman, "network", "rm", f"{cls.project}_default")
        cls.addClassCleanup(cls.compose, "down", "-v")

    @classmethod
    def compose(cls, *args, timeout=300, check=False):
        env = dict(podman_env(), SLUICE_IMAGE=cls.image, SLUICE_SECRETS=cls.secrets,
                   SLUICE_HTTP_PORT=str(cls.port),
                   SLUICE_PUBLIC_URL=f"http://127.0.0.1:{cls.port}")
        # podman-compose puts these after podman's subcommand, where podman takes them too.
        return run(["podman-compose", "--podman-args=--runtime runc",
                    f"--podman-run-args={' '.join(ulimit_args())}", "-p", cls.project,
                    "-f", COMPOSE_FILE, *args], env=env, timeout=timeout, check=check)

    def container(self, service):
        return f"{self.project}_{service}_1"

    def state(self, service):
        return podman("inspect", "--format", "{{.State.Status}} {{.State.Pid}}",
                      self.container(service)).stdout.strip()

    def logs(self):
        out = []
        for service in ("postgres", "redis", "migrate", "sluice1", "sluice2", "nginx"):
            got = podman("logs", "--tail", "30", self.container(service))
            out.append(f"--- {service}:\n{got.stdout[-3000:]}{got.stderr[-3000:]}")
        return "\n".join(out)

    def try_create(self, text, timeout=30):
        try:
            status, body = self.http.request("POST", "/api/v1/pastes", body=text.encode(),
                                             headers={"Content-Type": "text/plain"},
                                             timeout=timeout)
        except OSError as e:
            return None, str(e)
        return status, body

    def read(self, paste_id):
        """GET /raw/ID, waiting out the per-network read limit's 429s as a client is told."""
        while True:
            status, body = self.http.raw(paste_id)
            if status != 429:
                return status, body
            time.sleep(json.loads(body)["retry_after"])

    def up(self):
        """`up -d`, then until both processes answer their HEALTHCHECK and a create through nginx
        is acknowledged (PostgreSQL migrated). Returns the seconds it took."""
        started = time.monotonic()
        self.compose("up", "-d", timeout=600, check=True)

        def ready():
            for service in ("sluice1", "sluice2"):
                if podman("exec", self.container(service), *PROBE).returncode != 0:
                    return False
            return self.try_create("ready?\n", timeout=5)[0] == 201
        try:
            wait_until(ready, 180, "the fleet acknowledging creates through nginx")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.logs()}") from None
        return time.monotonic() - started

    def load(self, acked, stop, errors):
        """Creates from one thread until stop is set: each 201 recorded with its text, a 429 waited
        out, any other answer (a create in flight on the killed process may fail) counted."""
        while not stop.is_set():
            text = f"paste {uuid.uuid4().hex}\n" * 3
            status, body = self.try_create(text)
            if status == 201:
                acked.append((json.loads(body)["id"], text, time.monotonic()))
            elif status == 429:
                # The per-network create limit, shared by both processes through Redis: an honest
                # answer, waited out as the client is told.
                time.sleep(json.loads(body)["retry_after"])
            else:
                errors.append((status, body[:200] if isinstance(body, bytes) else body))

    def test_fleet_serves_through_nginx_survives_a_killed_process_and_keeps_data(self):
        took = self.up()
        print(f"\ncompose up to the first acknowledged create through nginx: {took:.1f} s",
              file=sys.stderr)
        paste = self.http.create("through nginx\n")
        self.assertEqual(self.read(paste), (200, b"through nginx\n"))

        acked, errors, stop = [], [], threading.Event()
        threads = [threading.Thread(target=self.load, args=(acked, stop, errors))
                   for _ in range(THREADS)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(acked) >= BEFORE_KILL, 120, "creates before the kill")
            podman("kill", "-s", "KILL", self.container("sluice1"), check=True)
            killed_at = time.monotonic()
            wait_until(lambda: sum(1 for a in acked if a[2] > killed_at) >= AFTER_KILL, 180,
                       f"creates after the kill ({len(errors)} failed: {errors[:5]})")
        finally:
            stop.set()
            for t in threads:
                t.join()
        print(f"{len(acked)} creates acknowledged, {len(errors)} not: {errors[:5]}",
              file=sys.stderr)
        # The process left took the creates; a failure is at most one in flight per thread on
        # the killed process.
        self.assertLessEqual(len(errors), THREADS, errors)
        self.assertIn("running", self.state("sluice2"))

        for paste_id, text, _ in acked:
            self.assertEqual(self.read(paste_id), (200, text.encode()), paste_id)

        # `down` without -v keeps the volumes; the next `up` serves the old pastes.
        self.compose("down", timeout=300, check=True)
        for volume in ("bodies", "postgres"):
            self.assertEqual(podman("volume", "exists", f"{self.project}_{volume}").returncode, 0,
                             volume)
        took = self.up()
        print(f"compose up again (volumes kept): {took:.1f} s", file=sys.stderr)
        self.assertEqual(self.read(paste), (200, b"through nginx\n"))
        for paste_id, text, _ in acked:
            self.assertEqual(self.read(paste_id), (200, text.encode()), paste_id)


if __name__ == "__main__":
    unittest.main()
