#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests: `start DIR` makes a cluster in DIR (initdb as an
# unprivileged user: `postgres` when this runs as root), listens on a free loopback port and a
# socket in DIR, and prints `postgres://corral:PASSWORD@127.0.0.1:PORT/corral`; `stop DIR` stops
# it by its pid; `resume DIR` starts a stopped one again on its port. With PG_TEST_TLS=CERTDIR
# (server.crt and server.key in it) the server also speaks TLS with that certificate. Exits 3 when PostgreSQL is not installed (the tests then report skipped).
set -euo pipefail
cmd=${1:?usage: pg-test.sh start|stop DIR}
dir=${2:?usage: pg-test.sh start|stop DIR}

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "PostgreSQL is not installed" >&2; exit 3; }

as_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s\n' "$password" > "$dir/pwfile"
    [ "$(id -u)" = 0 ] && chown postgres "$dir/pwfile"
    as_user "$bin/initdb" -D "$dir/data" -U corral --pwfile="$dir/pwfile" -A scram-sha-256 --no-sync >"$dir/initdb.log" 2>&1
    rm -f "$dir/pwfile"
    port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
    opts="-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
    if [ -n "${PG_TEST_TLS:-}" ]; then
      install -m 600 "$PG_TEST_TLS/server.crt" "$dir/server.crt"
      install -m 600 "$PG_TEST_TLS/server.key" "$dir/server.key"
      [ "$(id -u)" = 0 ] && chown postgres "$dir/server.crt" "$dir/server.key"
      opts="$opts -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
    fi
    echo "$opts" > "$dir/opts"
    as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$opts" start >/dev/null
    echo "$port" > "$dir/port"
    PGPASSWORD=$password "$bin/psql" -h 127.0.0.1 -p "$port" -U corral -d postgres -qc "CREATE DATABASE corral" >/dev/null
    echo "postgres://corral:$password@127.0.0.1:$port/corral"
    ;;
  resume)
    as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$(cat "$dir/opts")" start >/dev/null
    ;;
  stop)
    [ -f "$dir/data/postmaster.pid" ] && as_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    ;;
  *) echo "usage: pg-test.sh start|stop|resume DIR" >&2; exit 2 ;;
esac
