#!/usr/bin/env bash
# nginx for deploy/compose/compose.yaml: the project's deploy/nginx/sluice.conf with the compose
# services as its upstreams (arguments HOST:PORT...), listening on every address of the container,
# without the realip lines (no edge in front here), as scripts/stack.sh renders it for `make stack`.
set -euo pipefail
upstreams=""
for server in "$@"; do
  upstreams+="    server $server max_fails=0;\n"
done
sed -e "s|^pid .*|pid /tmp/nginx.pid;|" \
  -e "s|listen 127.0.0.1:8080;|listen 8080;|" \
  -e "/server 127.0.0.1:818[12] max_fails=0;/d" \
  -e "/set_real_ip_from/d" -e "/real_ip_header/d" \
  -e "s|    least_conn;|    least_conn;\n$upstreams|" \
  /etc/sluice-compose/sluice.conf >/tmp/nginx.conf
exec nginx -c /tmp/nginx.conf -e stderr -g 'daemon off;'
