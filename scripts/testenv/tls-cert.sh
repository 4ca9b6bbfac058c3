#!/usr/bin/env bash
# A throwaway CA and a server certificate it signed, for the test servers that speak TLS
# (postgres.sh, redis.sh and s3rver.sh start-tls), each valid for two days:
#
#   tls-cert.sh DIR SAN   writes DIR/ca.pem, DIR/ca.key, DIR/server.pem and DIR/server.key, the
#                         server's subjectAltName being SAN (e.g. DNS:localhost, or
#                         DNS:localhost,IP:127.0.0.1). A certificate for localhost alone lets a
#                         test see a client that checks names refuse 127.0.0.1.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 DIR SAN" >&2; exit 2; }
cd "$1"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=sluice test CA" \
  -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr \
  2>/dev/null
printf 'subjectAltName=%s\n' "$2" >san.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile san.ext -out server.pem 2>/dev/null
rm -f server.csr san.ext ca.srl
