"""A Redis that misbehaves on request, for tests/integration/test_redis_misbehaving.py.

Speaks just enough RESP2 for sluice (src/store/redis/redis_shared_state.cc): AUTH, PING, ECHO, GET,
SET [EX n] [NX], EVAL/EVALSHA of sluice's two scripts (recognised by their text: the bucket script
always allows and reads every bucket full, the invalidation script sets and publishes), SUBSCRIBE, SCRIPT FLUSH. Any other
command gets an error.

`FAKE.MODE <mode>` (sent by the test on a connection of its own) changes how every connection
behaves from then on; `FAKE.STATS` answers an array of counters. Modes:

  good              a well-behaved server
  push-ints         subscribers receive *3 :1 :2 :3
  push-short        subscribers receive *1 $7 message
  push-int-channel  subscribers receive a message whose channel is an integer
  push-unsubscribe  subscribers receive an unsubscribe without its count
  unsolicited       command connections receive +OK nobody asked for
  dup               the reply to each data command (GET, SET, EVAL*) is sent twice
  drop              the reply to every third data command is never sent
  swap              GET answers with the value of another key
  wrong-shape       the bucket script answers replies of the wrong shape, in turn
  stall             nothing is answered any more (connections stay open)

Usage: fake_redis.py PORT_FILE  (listens on a free loopback port and writes it to PORT_FILE).
"""

import asyncio
import hashlib
import itertools
import os
import random
import sys

PUSHES = {
    "push-ints": b"*3\r\n:1\r\n:2\r\n:3\r\n",
    "push-short": b"*1\r\n$7\r\nmessage\r\n",
    "push-int-channel": b"*3\r\n$7\r\nmessage\r\n:17\r\n$12\r\nabcdefabcdef\r\n",
    "push-unsubscribe": b"*2\r\n$11\r\nunsubscribe\r\n$17\r\nsluice:invalidate\r\n",
}

WRONG_SHAPES = [
    b"*1\r\n$1\r\n0\r\n",  # {"0"}: counted as allowed by the hiredis-era reader
    b":0\r\n",
    b"*0\r\n",
    b"+OK\r\n",
    b"$-1\r\n",
    b"*2\r\n:0\r\n:0\r\n",
    b"*4\r\n:9\r\n$1\r\n0\r\n$1\r\n1\r\n:0\r\n",  # names a bucket that was not asked for
    b"*4\r\n:1\r\n$3\r\nabc\r\n$1\r\n1\r\n:0\r\n",
    b"*4\r\n:1\r\n$1\r\n0\r\n$3\r\ninf\r\n:0\r\n",
    b"-ERR something odd\r\n",
]

DATA_COMMANDS = {b"GET", b"SET", b"EVAL", b"EVALSHA"}


def bulk(b):
    return b"$-1\r\n" if b is None else b"$%d\r\n%s\r\n" % (len(b), b)


def array(items):
    return b"*%d\r\n" % len(items) + b"".join(items)


class Fake:
    def __init__(self):
        self.mode = "good"
        self.data = {}
        self.scripts = {}  # sha -> kind
        self.subscribers = {}  # writer -> channel
        self.stats = {"connections": 0, "commands": 0, "auth": 0}
        self.data_count = itertools.count()
        self.wrong = itertools.cycle(WRONG_SHAPES)

    async def read_command(self, reader):
        line = await reader.readline()
        if not line:
            return None
        if not line.startswith(b"*"):
            return line.split()  # inline command (redis-cli, telnet)
        args = []
        for _ in range(int(line[1:])):
            n = int((await reader.readline())[1:])
            args.append((await reader.readexactly(n + 2))[:-2])
        return args

    def run_script(self, text_kind, keys, argv):
        if text_kind == "buckets":
            if self.mode == "wrong-shape" and argv and argv[0] in (b"take", b"peek"):
                return next(self.wrong)
            if argv and argv[0] == b"peek":
                # Every take is allowed here, so every bucket reads full: its burst.
                return array([b":-1\r\n"] + [bulk(burst) for burst in argv[2::3]])
            return b"*1\r\n:0\r\n"
        # The invalidation script: SET KEYS[1] ARGV[1] EX ARGV[2]; PUBLISH ARGV[3] ARGV[4].
        self.data[keys[0]] = argv[0]
        return b":%d\r\n" % self.publish(argv[2], argv[3])

    def publish(self, channel, message):
        n = 0
        for writer, subscribed in list(self.subscribers.items()):
            if subscribed == channel:
                writer.write(array([bulk(b"message"), bulk(channel), bulk(message)]))
                n += 1
        return n

    def answer(self, args):
        name = args[0].upper()
        if name == b"AUTH":
            self.stats["auth"] += 1
        if name == b"AUTH" or name == b"PING":
            return b"+OK\r\n" if name == b"AUTH" else b"+PONG\r\n"
        if name == b"ECHO":
            return bulk(args[1])
        if name == b"GET":
            if self.mode == "swap":
                others = [v for k, v in self.data.items() if k != args[1]]
                if others:
                    return bulk(random.choice(others))
            return bulk(self.data.get(args[1]))
        if name == b"SET":
            opts = [a.upper() for a in args[3:]]
            if b"NX" in opts and args[1] in self.data:
                return b"$-1\r\n"
            self.data[args[1]] = args[2]
            return b"+OK\r\n"
        if name in (b"EVAL", b"EVALSHA"):
            if name == b"EVAL":
                sha = hashlib.sha1(args[1]).hexdigest().encode()
                self.scripts[sha] = "buckets" if b"TIME" in args[1] else "invalidate"
            else:
                sha = args[1]
                if sha not in self.scripts:
                    return b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
            nkeys = int(args[2])
            return self.run_script(self.scripts[sha], args[3:3 + nkeys], args[3 + nkeys:])
        if name == b"SCRIPT":
            self.scripts.clear()
            return b"+OK\r\n"
        if name == b"FLUSHALL":
            self.data.clear()
            return b"+OK\r\n"
        return b"-ERR unknown command '%s'\r\n" % name

    async def serve(self, reader, writer):
        self.stats["connections"] += 1
        pusher = None
        try:
            while True:
                args = await self.read_command(reader)
                if args is None:
                    break
                if not args:
                    continue
                name = args[0].upper()
                self.stats["commands"] += 1
                if name == b"FAKE.MODE":
                    self.mode = args[1].decode()
                    writer.write(b"+OK\r\n")
                elif name == b"FAKE.STATS":
                    writer.write(array([bulk(f"{k}={v}".encode()) for k, v in self.stats.items()]))
                elif self.mode == "stall":
                    pass
                elif name == b"SUBSCRIBE":
                    self.subscribers[writer] = args[1]
                    writer.write(array([bulk(b"subscribe"), bulk(args[1]), b":1\r\n"]))
                    if pusher is None:
                        pusher = asyncio.ensure_future(self.push_loop(writer))
                else:
                    reply = self.answer(args)
                    if name in DATA_COMMANDS:
                        n = next(self.data_count)
                        if self.mode == "dup":
                            reply = reply * 2
                        elif self.mode == "drop" and n % 3 == 2:
                            reply = b""
                    writer.write(reply)
                    if self.mode == "unsolicited" and name == b"ECHO":
                        writer.write(b"+OK\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
            pass
        finally:
            self.subscribers.pop(writer, None)
            if pusher is not None:
                pusher.cancel()
            writer.close()

    async def push_loop(self, writer):
        """While a push mode is on, the subscriber receives its payload every 20 ms."""
        while True:
            await asyncio.sleep(0.02)
            payload = PUSHES.get(self.mode)
            if payload is not None and writer in self.subscribers:
                writer.write(payload)


async def main(port_file):
    fake = Fake()
    server = await asyncio.start_server(fake.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
