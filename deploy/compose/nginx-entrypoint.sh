#!/usr/bin/env bash
# nginx for deploy/compose/compose.yaml: the project's deploy/nginx/sluice.conf with the compose
# services as its upstreams (arguments HOST:PORT...), listening on every address of the container,
# without the realip lines (no edge in front here), as scripts/stack.sh renders it for `make stack`.
#
# One difference, on purpose: the stack's processes share the balancer's host, where a dead one
# refuses at once and systemd restarts it, so its nginx never retries (proxy_next_upstream off,
# max_fails=0). Here a killed container's address stops answering at all (a connection hangs until
# proxy_connect_timeout), and its restart may come back on another address that nginx, resolving
# names once at start, would not learn. So a request that could not be handed to one process goes
# to the other (error/timeout while connecting: a create is never sent twice, since nginx does not
# pass on a non-idempotent request it has already sent), a process that failed once is left out for
# fail_timeout, and connecting gives up after 2 s. A 503 the app sheds is still passed through,
# never retried elsewhere: the app's own answer to overload stays the client's.
set -euo pipefail
upstreams=""
for server in "$@"; do
  upstreams+="    server $server max_fails=1 fail_timeout=10s;\n"
done
sed -e "s|^pid .*|pid /tmp/nginx.pid;|" \
  -e "s|listen 127.0.0.1:8080;|listen 8080;|" \
  -e "/server 127.0.0.1:818[12] max_fails=0;/d" \
  -e "/set_real_ip_from/d" -e "/real_ip_header/d" \
  -e "s|    least_conn;|    least_conn;\n$upstreams|" \
  -e "s|proxy_next_upstream off;|proxy_next_upstream error timeout;\n      proxy_next_upstream_tries 2;\n      proxy_connect_timeout 2s;|" \
  /etc/sluice-compose/sluice.conf >/tmp/nginx.conf
exec nginx -c /tmp/nginx.conf -e stderr -g 'daemon off;'
