#!/usr/bin/env bash
# mpq as an endpoint of the QUIC interop runner (https://github.com/quic-interop/quic-interop-runner):
# the runner starts this script in the client and the server container with
#   ROLE       client | server
#   TESTCASE   the test case (handshake, transfer, retry, ...); one mpq does not support exits 127
#   REQUESTS   client: the URLs to download, separated by spaces
#   SSLKEYLOGFILE, QLOGDIR   where to write TLS secrets and qlog files (optional)
# and mounts /www (files to serve), /downloads (where the client stores them) and /certs
# (cert.pem, priv.key). Outside Docker (interop/test_endpoint_contract.py) the same script runs
# with these overridable: MPQ (the binary), WWW, DOWNLOADS, CERTS, PORT (server, default 443).
# The client exits 0 once every file is downloaded, 1 on an error.
set -u

MPQ=${MPQ:-mpq}
WWW=${WWW:-/www}
DOWNLOADS=${DOWNLOADS:-/downloads}
CERTS=${CERTS:-/certs}
PORT=${PORT:-443}
ROLE=${ROLE:-}
TESTCASE=${TESTCASE:-}

# The network simulator's endpoint image sets up routes in /setup.sh; the client waits for the
# simulator to be up (both exist only in the runner's containers).
[ -x /setup.sh ] && /setup.sh

unsupported() {
    echo "run_endpoint: test case '$TESTCASE' is not supported by mpq as $ROLE" >&2
    exit 127
}

common=()
[ -n "${SSLKEYLOGFILE:-}" ] && common+=(--keylog "$SSLKEYLOGFILE")
[ -n "${QLOGDIR:-}" ] && common+=(--qlog-dir "$QLOGDIR")

case "$ROLE" in
server)
    args=(server --listen "[::]:$PORT" --root "$WWW" --cert "$CERTS/cert.pem" --key "$CERTS/priv.key" -v)
    case "$TESTCASE" in
        # Test cases the server serves plainly (the runner's names and the names of the cases
        # that pass one of these, e.g. handshakeloss -> multiconnect, goodput -> transfer).
        handshake | transfer | multiplexing | longrtt | multiconnect | blackhole | keyupdate | ecn \
            | amplificationlimit | handshakeloss | transferloss | handshakecorruption \
            | transfercorruption | ipv6 | goodput | crosstraffic | rebind-port | rebind-addr \
            | resumption | zerortt) ;;
        retry) args+=(--retry always) ;;
        chacha20) args+=(--cipher chacha20) ;;
        # Compatible version negotiation: the client starts in v1 and offers v2; the server
        # prefers v2 and moves the connection to it (RFC 9368 §2.3).
        v2) args+=(--versions v2,v1) ;;
        http3) args+=(--http3) ;;
        # The server offers a preferred address (RFC 9000 §9.6) the client moves to:
        # PREFERRED_ADDRESSES (space-separated), else port 4443 of the container's first IPv4
        # and IPv6 addresses (the runner gives the server one of each).
        connectionmigration)
            pa=${PREFERRED_ADDRESSES:-}
            if [ -z "$pa" ]; then
                for ip in $(hostname -I 2>/dev/null); do
                    case "$ip" in
                        *:*) [ -z "${v6:-}" ] && v6="[$ip]:4443" ;;
                        *) [ -z "${v4:-}" ] && v4="$ip:4443" ;;
                    esac
                done
                pa="${v4:-} ${v6:-}"
            fi
            for a in $pa; do args+=(--preferred-address "$a"); done
            ;;
        *) unsupported ;;
    esac
    exec "$MPQ" "${args[@]}" "${common[@]}"
    ;;
client)
    [ -x /wait-for-it.sh ] && /wait-for-it.sh sim:57832 -s -t 30
    read -r -a urls <<<"${REQUESTS:-}"
    if [ "${#urls[@]}" -eq 0 ]; then
        echo "run_endpoint: REQUESTS names no URL to download" >&2
        exit 1
    fi
    args=(client --output "$DOWNLOADS" --timeout 120)
    if [ -f "$CERTS/ca.pem" ]; then
        args+=(--ca "$CERTS/ca.pem")
    else
        # The runner gives the client no CA: like the other implementations, do not verify.
        args+=(--insecure)
    fi
    case "$TESTCASE" in
        handshake | transfer | multiplexing | blackhole | ecn | amplificationlimit \
            | transferloss | transfercorruption | ipv6 | goodput | crosstraffic | rebind-port \
            | rebind-addr) ;;
        # (-v: the log says when the closing period, three PTOs of a 1.5 s round trip, was
        # cut short at the process's end.)
        longrtt) args+=(-v) ;;
        retry) args+=(-v) ;;
        chacha20) args+=(--cipher chacha20 -v) ;;
        # A key update early in the connection (within the first MB; a downloading client
        # sends a packet for every ~30 it receives, so it counts few).
        keyupdate) args+=(--key-update-every 16) ;;
        resumption) args+=(--resume -v) ;;
        zerortt) args+=(--0rtt -v) ;;
        # Start in v1, offer and prefer v2 (the server moves the connection to v2).
        v2) args+=(--versions v2,v1 -v) ;;
        http3) args+=(--http3) ;;
        # A connection without multipath moves to the server's preferred address by default.
        connectionmigration) args+=(--no-multipath -v) ;;
        # One connection per file, one after the other. Under the loss cases' 30 % (each way)
        # a handshake's flights can be lost several times in a row, and the probe timeout
        # doubles each time (RFC 9002 §6.2.1): 10 s (the default limit) was passed in 2 of 25
        # runs, so the limit is the runner's own timeout here.
        multiconnect | handshakeloss | handshakecorruption)
            args+=(--handshake-timeout 60)
            for u in "${urls[@]}"; do
                "$MPQ" "${args[@]}" "${common[@]}" "$u" || exit 1
            done
            exit 0
            ;;
        *) unsupported ;;
    esac
    "$MPQ" "${args[@]}" "${common[@]}" "${urls[@]}" || exit 1
    exit 0
    ;;
*)
    echo "run_endpoint: ROLE must be client or server (got '$ROLE')" >&2
    exit 1
    ;;
esac
