# Shared by the run scripts of implementations/*/ (sourced, not run): the environment
# contract of README.md, checked once, and the helpers every implementation needs.
# shellcheck shell=bash

IMPLEMENTATIONS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$IMPLEMENTATIONS")"
INTEROP="$REPO/interop"

ROLE=${ROLE:-}
TESTCASE=${TESTCASE:-transfer}
IP=${IP:-0.0.0.0}
PORT=${PORT:-443}
LOGS=${LOGS:-}
QLOGDIR=${QLOGDIR:-}
SSLKEYLOGFILE=${SSLKEYLOGFILE:-}
CLIENT_IPS=${CLIENT_IPS:-}

# Says why and exits 127, the interop runner's code for "this test case is not supported".
unsupported() {
    echo "$IMPL: test case '$TESTCASE' is not supported as $ROLE${1:+ ($1)}" >&2
    exit 127
}

# Exits 1 with a message unless every named variable is set.
need() {
    local v
    for v in "$@"; do
        if [ -z "${!v:-}" ]; then
            echo "$IMPL: $v must be set (see implementations/README.md)" >&2
            exit 1
        fi
    done
}

# The bulk test cases every implementation here supports: a download of the files of
# REQUESTS ("transfer" in the interop runner, "goodput" in its measurements).
bulk_case() {
    case "$TESTCASE" in
        transfer | goodput | handshake) return 0 ;;
        *) return 1 ;;
    esac
}

# The client's local IPs, one per path (CLIENT_IPS), as an array; empty when unset.
read -r -a client_ips <<<"$CLIENT_IPS"

# The URLs of REQUESTS as an array.
read -r -a urls <<<"${REQUESTS:-}"

# Creates the log directories that are set.
[ -n "$LOGS" ] && mkdir -p "$LOGS"
[ -n "$QLOGDIR" ] && mkdir -p "$QLOGDIR"
true

# HOST:PORT with IPv6 hosts in brackets.
hostport() {
    case "$1" in
        *:*) echo "[$1]:$2" ;;
        *) echo "$1:$2" ;;
    esac
}
