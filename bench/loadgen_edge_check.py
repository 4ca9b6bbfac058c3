"""Both Run engines against the edge cases the scenarios rely on (bench/results/loadgen.md):
refused connects, a silent server (timeout), an answer before the body is sent (413 with reason and
Retry-After), a body read until close (keep_body), a failing request factory. Prints one line per
record; the two engines must print the same. usage: python3 bench/loadgen_edge_check.py | sort | uniq -c"""
import socket, threading, sys, time
sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/tests/lib")
import loadgen as lg

def server(mode):
    ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(64)
    def loop():
        while True:
            c, _ = ls.accept()
            def h(c=c):
                data = b""
                while b"\r\n\r\n" not in data:
                    data += c.recv(65536)
                if mode == "silent":
                    time.sleep(2); c.close(); return
                if mode == "early":
                    c.sendall(b'HTTP/1.1 413 Too Large\r\nContent-Type: application/json\r\nContent-Length: 22\r\nRetry-After: 7\r\n\r\n{"reason": "too_big"}\n')
                    time.sleep(0.2); c.close(); return
                if mode == "close":
                    c.sendall(b"HTTP/1.1 200 OK\r\n\r\nbody until close"); c.close(); return
            threading.Thread(target=h, daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return ls.getsockname()[1]

dead = socket.socket(); dead.bind(("127.0.0.1", 0)); dport = dead.getsockname()[1]; dead.close()
ports = {m: server(m) for m in ("silent", "early", "close")}
for engine in ("threads", "selectors"):
    streams = [
        lg.Stream("refused", 5, 0.4, lambda i: lg.Request("GET", "/"), target=("127.0.0.1", dport)),
        lg.Stream("silent", 5, 0.4, lambda i: lg.Request("GET", "/"), timeout=0.3, target=("127.0.0.1", ports["silent"])),
        lg.Stream("early", 5, 0.4, lambda i: lg.Request("POST", "/", body=b"x" * 3_000_000), target=("127.0.0.1", ports["early"])),
        lg.Stream("close", 5, 0.4, lambda i: lg.Request("GET", "/"), keep_body=4, target=("127.0.0.1", ports["close"])),
        lg.Stream("badmake", 5, 0.2, lambda i: 1 / 0),
    ]
    run = lg.Run("127.0.0.1", 1, streams, engine=engine).start(); run.wait()
    for r in run.records():
        print(engine, r.stream, r.status, r.error, r.reason, r.retry_after, r.body, r.body_len, r.bytes_sent > 0)
