#!/bin/sh
# A private Docker Engine for the sandbox tests, on loopback only: no bridge, no iptables, no
# forwarding, no registry. Two images: corral-busybox, and corral-node (busybox and this machine's
# node).
#
#   scripts/dockerd-test.sh start <dir>   # installs docker.io + busybox-static if missing, starts
#                                         # dockerd on <dir>/docker.sock, imports corral-busybox:latest
#   export CORRAL_DOCKER_HOST=unix://<dir>/docker.sock
#   export CORRAL_DOCKER_TLS_HOST=$(cat <dir>/tls/host)   # the same daemon on 127.0.0.1 with TLS
#   export CORRAL_DOCKER_CERT_PATH=<dir>/tls              # ca.pem cert.pem key.pem, wrong-ca.pem
#   cargo test -p corral-core --lib sandbox
#   scripts/dockerd-test.sh stop <dir>    # SIGTERM to the recorded PID
#
# Needs root. Never creates a network: the daemon has no bridge at all.
set -eu

IMAGE=corral-busybox:latest
# The daemon's TLS listener on loopback (--tlsverify: a client certificate from the test CA), on
# a port that is free now unless CORRAL_DOCKER_TLS_PORT names one.
free_port() {
    node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })"
}

usage() {
    echo "usage: $0 start|stop <dir>" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
D=$(mkdir -p "$2" && cd "$2" && pwd)
SOCK="$D/docker.sock"

ping_ok() {
    curl -fsS --max-time 2 --unix-socket "$SOCK" http://docker/_ping >/dev/null 2>&1
}

start() {
    if ! command -v dockerd >/dev/null 2>&1 || [ ! -x /bin/busybox ]; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io busybox-static
    fi
    certs
    if [ -f "$D/dockerd.pid" ] && kill -0 "$(cat "$D/dockerd.pid")" 2>/dev/null && ping_ok; then
        echo "dockerd already running (pid $(cat "$D/dockerd.pid")) on unix://$SOCK"
    else
        mkdir -p "$D/data" "$D/exec"
        TLS_PORT=${CORRAL_DOCKER_TLS_PORT:-$(free_port)}
        echo "tcp://127.0.0.1:$TLS_PORT" >"$D/tls/host"
        dockerd --host "unix://$SOCK" --host "tcp://127.0.0.1:$TLS_PORT" --tlsverify \
            --tlscacert "$D/tls/ca.pem" --tlscert "$D/tls/server-cert.pem" --tlskey "$D/tls/server-key.pem" \
            --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/dockerd.pid" \
            --storage-driver overlay2 --bridge=none --iptables=false --ip6tables=false --ip-forward=false \
            --ip-masq=false --userland-proxy=false >"$D/dockerd.log" 2>&1 &
        echo $! >"$D/dockerd.launcher.pid"
        i=0
        until ping_ok; do
            i=$((i + 1))
            if [ $i -gt 300 ]; then
                echo "dockerd did not answer /_ping within 60 s; see $D/dockerd.log" >&2
                tail -20 "$D/dockerd.log" >&2 || true
                exit 1
            fi
            sleep 0.2
        done
        # --pidfile is written by dockerd itself; fall back to the launcher's PID.
        [ -s "$D/dockerd.pid" ] || cp "$D/dockerd.launcher.pid" "$D/dockerd.pid"
    fi

    # The image: Debian's static busybox, its applets as symlinks, a minimal /etc/passwd.
    rootfs="$D/rootfs"
    rm -rf "$rootfs"
    mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/root" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
    chmod 1777 "$rootfs/tmp"
    cp /bin/busybox "$rootfs/bin/busybox"
    for applet in $(/bin/busybox --list); do
        [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
    tar -C "$rootfs" -cf "$D/busybox.tar" .
    # Engine API, no docker CLI: POST /images/create?fromSrc=- with the tarball as the body.
    curl -fsS --unix-socket "$SOCK" -X POST -H 'Content-Type: application/x-tar' \
        --data-binary "@$D/busybox.tar" \
        "http://docker/images/create?fromSrc=-&repo=corral-busybox&tag=latest&changes=ENV%20PATH%3D%2Fbin" >/dev/null
    # A second image with this machine's node in it (and the libraries it loads), for the tests
    # that run Node programs in a container (the harness sessions' providers' bar).
    node_bin=$(command -v node)
    mkdir -p "$rootfs/usr/local/bin"
    cp "$node_bin" "$rootfs/usr/local/bin/node"
    for lib in $(ldd "$node_bin" | grep -o '/[^ ]*'); do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
    tar -C "$rootfs" -cf "$D/node.tar" .
    curl -fsS --unix-socket "$SOCK" -X POST -H 'Content-Type: application/x-tar' \
        --data-binary "@$D/node.tar" \
        "http://docker/images/create?fromSrc=-&repo=corral-node&tag=latest&changes=ENV%20PATH%3D%2Fusr%2Flocal%2Fbin%3A%2Fbin" >/dev/null
    rm -rf "$rootfs" "$D/node.tar"
    curl -fsS --unix-socket "$SOCK" "http://docker/images/$IMAGE/json" >/dev/null
    curl -fsS --unix-socket "$SOCK" "http://docker/images/corral-node:latest/json" >/dev/null
    echo "dockerd ready (pid $(cat "$D/dockerd.pid")): export CORRAL_DOCKER_HOST=unix://$SOCK CORRAL_DOCKER_TLS_HOST=$(cat "$D/tls/host") CORRAL_DOCKER_CERT_PATH=$D/tls"
}

# A test CA, the daemon's certificate for 127.0.0.1, a client certificate, and a CA that signed
# neither (for the refusal test), in <dir>/tls, made with the tests' own PKI (P-256).
certs() {
    T="$D/tls"
    mkdir -p "$T"
    [ -s "$T/key.pem" ] && return 0
    node "$(dirname "$0")/docker-test-certs.mjs" "$T"
}

stop() {
    if [ ! -f "$D/dockerd.pid" ]; then
        echo "no dockerd.pid in $D" >&2
        exit 1
    fi
    pid=$(cat "$D/dockerd.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        i=0
        while kill -0 "$pid" 2>/dev/null; do
            i=$((i + 1))
            if [ $i -gt 150 ]; then
                echo "dockerd (pid $pid) did not stop within 30 s" >&2
                exit 1
            fi
            sleep 0.2
        done
    fi
    rm -f "$D/dockerd.pid" "$D/dockerd.launcher.pid"
    echo "dockerd stopped"
}

case "$cmd" in
start) start ;;
stop) stop ;;
*) usage ;;
esac
