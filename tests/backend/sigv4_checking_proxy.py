"""A signature-checking front for s3rver, which accepts any well-formed SigV4 signature.

    python3 sigv4_checking_proxy.py UPSTREAM_URL DIR

Listens on a free 127.0.0.1 port (written to DIR/checked_endpoint), recomputes every request's
SigV4 signature and payload hash with botocore (the reference implementation behind the AWS CLI),
answers 403 SignatureDoesNotMatch or XAmzContentSHA256Mismatch as S3 would, and forwards what
passes to the upstream peer. Keeps client connections alive, so the store's pooling still shows.
Credentials: s3rver's defaults, S3RVER / S3RVER; an unknown access key is the upstream's to refuse.
"""

import hashlib
import http.client
import os
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SECRETS = {"S3RVER": "S3RVER"}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"}


def s3_error(code, message):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Idle client connections close after 5 s, as Node's server (s3rver) closes them.
    timeout = 5

    def log_message(self, *args):
        pass

    def check(self, body):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return None  # anonymous or another scheme: the upstream decides
        fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        access_key, date, region, service, _ = fields["Credential"].split("/")
        secret = SECRETS.get(access_key)
        if secret is None:
            return None
        if hashlib.sha256(body).hexdigest() != self.headers.get("x-amz-content-sha256"):
            return s3_error("XAmzContentSHA256Mismatch",
                            "The provided 'x-amz-content-sha256' header does not match what was computed.")
        signed = fields["SignedHeaders"].split(";")
        request = AWSRequest(method=self.command, url="http://" + self.headers["Host"] + self.path,
                             headers={name: self.headers[name] for name in signed}, data=body)
        request.context["timestamp"] = self.headers["x-amz-date"]
        signer = S3SigV4Auth(Credentials(access_key, secret), service, region)
        expected = signer.signature(
            signer.string_to_sign(request, signer.canonical_request(request)), request)
        if expected != fields["Signature"] or date != self.headers["x-amz-date"][:8]:
            return s3_error("SignatureDoesNotMatch",
                            "The request signature we calculated does not match the signature you "
                            "provided. Check your key and signing method.")
        return None

    def relay(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        refusal = self.check(body)
        if refusal is not None:
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(refusal)))
            self.end_headers()
            self.wfile.write(refusal)
            return
        upstream = http.client.HTTPConnection(self.server.upstream.hostname, self.server.upstream.port)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        upstream.request(self.command, self.path, body=body if length else None, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        upstream.close()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_DELETE = do_HEAD = do_POST = relay


def main():
    upstream, folder = sys.argv[1], sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.upstream = urllib.parse.urlsplit(upstream)
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    with open(os.path.join(folder, "checked_endpoint.tmp"), "w") as f:
        f.write(endpoint + "\n")
    os.rename(os.path.join(folder, "checked_endpoint.tmp"), os.path.join(folder, "checked_endpoint"))
    server.serve_forever()


if __name__ == "__main__":
    main()
