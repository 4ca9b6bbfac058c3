#!/usr/bin/env python3
"""The command line against hostile fake servers, case by case: what each run did (exit status,
wall time, peak RSS, killed or not), whether a kept delete token reached a host it was not kept
for, whether escape sequences reached the terminal raw, and whether the token file gained forged
lines. The fakes and the bounded runner are tests/integration/test_cli_hostile.py's; a run is
killed past 70 s or 1 GiB of RSS, and the table says so.

Usage: python3 bench/cli_hostile.py BINARY [BINARY...]  (e.g. /work/baseline/sluice
build/dev/sluice); prints one Markdown table per binary.
"""

import json
import os
import shutil
import socket
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "tests", "integration"),
                os.path.join(os.path.dirname(__file__), "..", "tests", "lib")]

import test_cli_hostile as t  # noqa: E402

H = t.HostileServer
RAW = (t.ESC, t.BEL, "\u009b".encode(), "\u202e".encode())


def fate(run):
    what = "killed: " + run.killed if run.killed else f"exit {run.returncode}"
    return f"{what}, {run.seconds:.1f} s, {run.peak_rss_kb // 1024} MiB"


def raw_escapes(data):
    return "raw escapes reach the terminal" if any(r in data for r in RAW) else "escaped"


class Case:
    def __init__(self):
        self.home = tempfile.mkdtemp(prefix="sluice-cli-figures-")
        self.servers = []

    def server(self, play, **kw):
        s = H(play, **kw)
        self.servers.append(s)
        return s

    def run(self, args, **kw):
        return t.run_cli(args, self.home, **kw)

    def token_lines(self):
        path = os.path.join(self.home, "sluice", "pastes")
        return open(path, "rb").read().split(b"\n")[:-1] if os.path.exists(path) else []

    def keep_token(self, server, base=""):
        answer = json.dumps({"id": t.ID, "url": f"{server.url}{base}/{t.ID}",
                             "delete_token": t.TOKEN, "expires_at": "2099-01-01T00:00:00Z"})
        server.play = H.on_create(H.answer(201, answer), server.play)
        self.run(["paste", "--server", server.url + base], stdin=b"text\n")
        server.requests.clear()
        server.connections = 0

    def admin_token(self):
        path = os.path.join(self.home, "admin-token")
        with open(path, "w") as f:
            f.write("admintoken\n")
        return path

    def close(self):
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def silent(args_of):
    c = Case()
    try:
        return fate(c.run(args_of(c)))
    finally:
        c.close()


def silent_get(c):
    return ["get", f"{c.server(H.silent).url}/{t.ID}"]


def silent_delete(c):
    s = c.server(H.silent)
    c.keep_token(s)
    return ["delete", f"{s.url}/{t.ID}"]


def silent_admin(c):
    return ["admin", "--admin", c.server(H.silent).url, "--token-file", c.admin_token(), "reports"]


def silent_admin_unix(c):
    path = os.path.join(c.home, "admin.sock")
    c.server(H.silent, family=socket.AF_UNIX, path=path)
    return ["admin", "--admin", f"unix:{path}", "--token-file", c.admin_token(), "audit"]


def blackhole_get(c):
    sock, filler = t.backlog_full_listener()
    c.servers.append(type("Closer", (), {"stop": lambda self: (filler.close(), sock.close())})())
    return ["get", f"http://127.0.0.1:{sock.getsockname()[1]}/{t.ID}"]


def endless(command, declared=None):
    def case():
        c = Case()
        try:
            s = c.server(H.endless(declared))
            if command == "delete":
                c.keep_token(s)
            return fate(c.run([command, f"{s.url}/{t.ID}"]))
        finally:
            c.close()
    return case


def token_to_fake(base):
    def case():
        c = Case()
        try:
            real = c.server(H.answer(204, b""))
            fake = c.server(H.answer(204, b""))
            c.keep_token(real, "/paste" if base else "")
            target = f"{real.url}/other/{t.ID}" if base else f"{fake.url}/{t.ID}"
            run = c.run(["delete", target])
            asked = real if base else fake
            leaked = any(f"Bearer {t.TOKEN}".encode() in head for head, _ in asked.requests)
            return f"{fate(run)}; token {'LEAKED' if leaked else 'not sent'}"
        finally:
            c.close()
    return case


def escapes(kind):
    def case():
        c = Case()
        try:
            if kind == "get error":
                s = c.server(H.answer(404, json.dumps({"error": t.HOSTILE_TEXT})))
                run = c.run(["get", f"{s.url}/{t.ID}"])
                shown = run.stderr
            elif kind == "paste refusal":
                s = c.server(H.answer(400, t.HOSTILE_TEXT.encode(),
                                      headers={"Content-Type": "text/plain"},
                                      reason="Bad \u202eRequest".encode()))
                run = c.run(["paste", "--server", s.url], stdin=b"x\n")
                shown = run.stderr
            elif kind == "printed link":
                s = c.server(H.answer(201, json.dumps(
                    {"id": t.ID, "url": f"http://h/{t.ID}{t.HOSTILE_TEXT}",
                     "delete_token": t.TOKEN})))
                run = c.run(["paste", "--server", s.url], stdin=b"x\n")
                listed = c.run(["list"])
                shown = run.stdout + run.stderr + listed.stdout
            elif kind == "admin error":
                s = c.server(H.answer(403, json.dumps({"error": t.HOSTILE_TEXT})))
                run = c.run(["admin", "--admin", s.url, "--token-file", c.admin_token(), "audit"])
                shown = run.stderr
            else:  # admin JSON with C1 controls and a bidi override inside its strings
                s = c.server(H.answer(200, json.dumps({"note": "\u009b2J \u202egnp.exe"},
                                                      ensure_ascii=False)))
                run = c.run(["admin", "--admin", s.url, "--token-file", c.admin_token(), "audit"])
                shown = run.stdout
            return f"{fate(run)}; {raw_escapes(shown)}"
        finally:
            c.close()
    return case


def forged(field):
    def case():
        c = Case()
        try:
            s = c.server(lambda *a: None)
            answer = {"id": t.ID, "url": f"{s.url}/{t.ID}", "delete_token": t.TOKEN,
                      "expires_at": "2099-01-01T00:00:00Z"}
            answer[field] += f"\n0 - {t.OTHER_ID} forgedtoken http://127.0.0.1:9/{t.OTHER_ID}"
            s.play = H.answer(201, json.dumps(answer))
            run = c.run(["paste", "--server", s.url], stdin=b"x\n")
            lines = c.token_lines()
            bad = sum(1 for line in lines if t.OTHER_ID.encode() in line)
            return f"{fate(run)}; {len(lines)} line(s) kept, {bad} forged"
        finally:
            c.close()
    return case


def malformed():
    c = Case()
    try:
        s = c.server(H.answer(200, b"text", headers={"Content-Type": "text/plain"}))
        runs = [c.run(["get", f"{s.url}/{t.ID}B"]), c.run(["get", f"{s.url}/{t.ID} x"])]
        return (f"exits {[r.returncode for r in runs]}; {s.connections} connection(s) made "
                "for 2 malformed links")
    finally:
        c.close()


def endless_queue():
    c = Case()
    try:
        s = c.server(H.answer(200, json.dumps({"pastes": [], "next": "x", "pending": 0})))
        run = c.run(["admin", "--admin", s.url, "--token-file", c.admin_token(), "reports"],
                    time_limit=30)
        return f"{fate(run)}; {len(s.requests)} page(s) asked"
    finally:
        c.close()


CASES = [
    ("get, silent server", lambda: silent(silent_get)),
    ("delete, silent server", lambda: silent(silent_delete)),
    ("admin reports, silent server", lambda: silent(silent_admin)),
    ("admin audit, silent Unix socket", lambda: silent(silent_admin_unix)),
    ("get, connect never completes", lambda: silent(blackhole_get)),
    ("get, endless answer", endless("get")),
    ("get, Content-Length 10 GiB", endless("get", 10 << 30)),
    ("delete, endless answer", endless("delete")),
    ("delete via a fake host, token kept for the real one", token_to_fake(False)),
    ("delete via another base path of the same host", token_to_fake(True)),
    ("escapes in get's error message", escapes("get error")),
    ("escapes in paste's refusal (body, reason phrase)", escapes("paste refusal")),
    ("escapes in the created link (stdout, then list)", escapes("printed link")),
    ("escapes in admin's error", escapes("admin error")),
    ("C1 controls and bidi in admin's JSON", escapes("admin json")),
    ("newline in the create answer's url", forged("url")),
    ("newline in the create answer's delete_token", forged("delete_token")),
    ("newline in the create answer's expires_at", forged("expires_at")),
    ("malformed ids (13 characters; a space)", malformed),
    ("admin reports, every page empty with a next", endless_queue),
]


def main():
    for binary in sys.argv[1:]:
        os.environ["SLUICE_BIN"] = os.path.abspath(binary)
        # The slow cases only wait: run them at once.
        with ThreadPoolExecutor(5) as pool:
            futures = [(name, pool.submit(case)) for name, case in CASES[:5]]
            results = [(name, f.result()) for name, f in futures]
        results += [(name, case()) for name, case in CASES[5:]]
        print(f"\n### {binary}\n\n| case | what happened |\n|---|---|")
        for name, outcome in results:
            print(f"| {name} | {outcome} |")


if __name__ == "__main__":
    main()
