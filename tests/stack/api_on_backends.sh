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
# The suite checks what the API answers, not how fast: the timeouts sized for a quiet production
# host (a 20 ms metadata read) would turn a scheduling hiccup of a shared CI machine into a 503.
# The overload scenarios (tests/stack/test_stack.py, the chaos lab) keep the defaults.
patient="--read-budget 5s --meta-get-timeout 2s --blob-get-timeout 3s --insert-timeout 2s"
patient+=" --put-timeout 5s --create-budget 10s --delete-budget 5s --cache-timeout 1s"
export SLUICE_TEST_BACKEND_ARGS="--meta $pg_url --blob s3://sluice-test --s3-endpoint $s3_endpoint --cache redis://127.0.0.1:$redis_port $patient"
cd "$(dirname "$0")/../integration"
exec python3 -m unittest -v test_api
