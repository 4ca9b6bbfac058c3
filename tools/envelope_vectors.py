#!/usr/bin/env python3
"""Writes tests/vectors/envelope_v1.json, the published test vectors of docs/encryption.md.

A third implementation of the envelope (Python's `cryptography` and zlib), apart from the CLI's
(src/app/envelope_crypto.cc) and the browser's (/static/crypt.js): both of those are tested
against what this one wrote. The inputs are fixed, so running it again writes the same file.
"""
import base64
import hashlib
import json
import sys
import zlib

from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def b64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def fixed(label: str, n: int) -> bytes:
    # Deterministic "random" bytes, so the file is reproducible.
    return hashlib.sha256(label.encode()).digest()[:n]


def aad(iv, z, kdf):
    k = "null" if kdf is None else (
        '{"name":"PBKDF2-SHA256","iter":%d,"salt":"%s"}' % (kdf["iter"], b64u(kdf["salt"])))
    return '{"v":1,"alg":"A256GCM","iv":"%s","z":"%s","kdf":%s}' % (b64u(iv), z, k)


def seal(plain: bytes, key: bytes, iv: bytes, z: str, password, kdf):
    clear = plain
    if z == "deflate-raw":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        clear = c.compress(plain) + c.flush()
    aes_key = key
    if kdf is not None:
        aes_key = hashlib.pbkdf2_hmac("sha256", key + password.encode("utf-8"), kdf["salt"],
                                      kdf["iter"], 32)
    header = aad(iv, z, kdf)
    ct = AESGCM(aes_key).encrypt(iv, clear, header.encode())
    return header[:-1] + ',"ct":"%s"}' % b64u(ct)


CASES = [
    ("hello", b"hello, world\n", "none", None),
    ("deflated", "".join("line %d of a log that repeats itself\n" % i for i in range(40)).encode(),
     "deflate-raw", None),
    ("awkward-bytes", b"\xef\xbb\xbfBOM then CRLF\r\nNUL\x00 and 4-byte \xf0\x9f\x98\x80 UTF-8\r\n",
     "none", None),
    ("empty", b"", "none", None),
    ("password", b"the secret is 42\n", "none", "correct horse battery staple"),
    ("password-unicode-deflated", ("p\u00e4ste " * 50).encode(), "deflate-raw",
     "p\u00e4ssw\u00f6rd \U0001f511"),
]


def main():
    vectors = []
    for name, plain, z, password in CASES:
        key = fixed("key " + name, 32)
        iv = fixed("iv " + name, 12)
        kdf = None
        if password is not None:
            kdf = {"iter": 100000, "salt": fixed("salt " + name, 16)}
        vectors.append({
            "name": name,
            "key": b64u(key),
            "password": password,
            "plaintext_hex": plain.hex(),
            "envelope": seal(plain, key, iv, z, password, kdf),
        })
    # Envelopes of the right shape that must not open, each with the reason a reader gives.
    good = vectors[0]
    env = json.loads(good["envelope"])
    tampered_tag = dict(env)
    ct = bytearray(base64.urlsafe_b64decode(env["ct"] + "=" * (-len(env["ct"]) % 4)))
    ct[-1] ^= 1
    tampered_tag["ct"] = b64u(bytes(ct))
    swapped = dict(env)
    swapped["z"] = "deflate-raw"  # the header is authenticated: the tag fails
    pw = json.loads(vectors[4]["envelope"])
    fewer = dict(pw)
    fewer["kdf"] = dict(pw["kdf"], iter=100001)
    failures = [
        {"name": "tampered-tag", "key": good["key"], "password": None,
         "envelope": json.dumps(tampered_tag, separators=(",", ":")), "error": "wrong_key"},
        {"name": "swapped-header", "key": good["key"], "password": None,
         "envelope": json.dumps(swapped, separators=(",", ":")), "error": "wrong_key"},
        {"name": "wrong-key", "key": vectors[1]["key"], "password": None,
         "envelope": good["envelope"], "error": "wrong_key"},
        {"name": "wrong-password", "key": vectors[4]["key"], "password": "Correct horse battery staple",
         "envelope": vectors[4]["envelope"], "error": "wrong_key"},
        {"name": "changed-iterations", "key": vectors[4]["key"], "password": vectors[4]["password"],
         "envelope": json.dumps(fewer, separators=(",", ":")), "error": "wrong_key"},
        {"name": "no-password", "key": vectors[4]["key"], "password": None,
         "envelope": vectors[4]["envelope"], "error": "password_required"},
        {"name": "short-key", "key": good["key"][:-1], "password": None,
         "envelope": good["envelope"], "error": "bad_key"},
    ]
    json.dump({"format": "sluice encrypted paste envelope, version 1 (docs/encryption.md)",
               "vectors": vectors, "failures": failures}, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
