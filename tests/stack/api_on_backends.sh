#!/usr/bin/env bash
# The API suite of the embedded pastebin (tests/integration/test_api.py), unchanged, against the
# scaled-out backends: every server it starts keeps its metadata in the PostgreSQL, its bodies in
# the s3rver and its limits and cache in the Redis that the CTest fixtures started. Tests that read
# the embedded store's files are skipped (they say so).
#   api_on_backends.sh POSTGRES_DIR S3RVER_DIR REDIS_DIR
set -euo pipefail
pg_url=$(cat "$1/url")
s3_endpoint=$(cat "$2/endpoint")
redis_port=$(cat "$3/port")
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
export SLUICE_TEST_BACKEND_ARGS="--meta $pg_url --blob s3://sluice-test --s3-endpoint $s3_endpoint --cache redis://127.0.0.1:$redis_port"
cd "$(dirname "$0")/../integration"
exec python3 -m unittest -v test_api
