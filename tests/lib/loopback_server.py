"""A listening socket on loopback (or a Unix socket path) and the thread that accepts on it, for
the tests' scripted peers: the fake and hostile servers of the client tests, the TLS relay.
Subclasses say what a connection gets in handle(conn); with threaded=True each connection is
handled on a thread of its own, else on the accepting thread, one after another."""

import socket
import threading


class LoopbackServer:
    def __init__(self, threaded=False, family=socket.AF_INET, path=None):
        self.threaded = threaded
        self.connections = 0
        self.conns = []
        self.stopping = threading.Event()
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_UNIX:
            self.sock.bind(path)
            self.path = path
        else:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("127.0.0.1", 0))
            self.port = self.sock.getsockname()[1]
        self.sock.listen(16)
        # Short, so that stop() is answered within it.
        self.sock.settimeout(0.1)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def handle(self, conn):
        raise NotImplementedError

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=10)
        for conn in self.conns:
            try:
                conn.close()
            except OSError:
                pass
        self.sock.close()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            self.conns.append(conn)
            if self.threaded:
                threading.Thread(target=self._handle_quietly, args=(conn,), daemon=True).start()
            else:
                self._handle_quietly(conn)

    def _handle_quietly(self, conn):
        # A peer that hangs up is part of what these tests play.
        try:
            self.handle(conn)
        except OSError:
            pass
