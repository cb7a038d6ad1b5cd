#!/usr/bin/env bash
# Two SSH "hosts" on this machine, to try the SSH testbed (testbed: ssh, mpq lab run --hosts)
# without two machines: a kernel testbed (mpq lab testbed up, the link emulator between its
# client and server namespaces) whose two namespaces each run OpenSSH's sshd on a management
# veth from the root namespace (10.253.K.2, key login only, a fresh key pair), and a hosts
# file for them (implementations: this checkout's folder, which both namespaces see).
#
#   scripts/ssh-hosts-local.sh up NAME --link SPEC [--link SPEC...]   # prints the hosts file
#   mpq lab run experiments/ssh-paths.yaml --hosts /tmp/mpq-ssh-NAME/hosts.json --out OUT
#   scripts/ssh-hosts-local.sh down NAME
#
# Needs root, /dev/net/tun and openssh-server (Debian: apt-get install openssh-server); MPQ
# names the mpq binary (default: target/release/mpq, then mpq on PATH). NAME: at most 12
# letters or digits; one such pair at a time (the management addresses are fixed). The same
# as crates/mpq/tests/lab_ssh.rs builds for its tests.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 name=$2
shift 2
[[ "$name" =~ ^[A-Za-z0-9]{1,12}$ ]] || { echo "NAME: 1-12 letters or digits" >&2; exit 2; }
mpq=${MPQ:-}
[ -n "$mpq" ] || { [ -x "$repo/target/release/mpq" ] && mpq="$repo/target/release/mpq"; } || mpq=$(command -v mpq || true)
[ -n "$mpq" ] || { echo "no mpq binary: cargo build --release -p mpq, or set MPQ" >&2; exit 1; }
dir=/tmp/mpq-ssh-$name
testbed=ssh$name

down() {
    for role in server client; do
        [ -f "$dir/sshd_$role.pid" ] && kill "$(cat "$dir/sshd_$role.pid")" 2>/dev/null || true
    done
    "$mpq" lab testbed down --name "$testbed" >/dev/null 2>&1 || true
    for k in 1 2; do ip link del "sh${name:0:10}$k" 2>/dev/null || true; done
    rm -rf "$dir"
}

case "$cmd" in
down)
    down
    echo "removed $testbed and its sshd instances"
    ;;
up)
    [ "$(id -u)" = 0 ] || { echo "needs root (namespaces and sshd)" >&2; exit 1; }
    [ -x /usr/sbin/sshd ] || { echo "no /usr/sbin/sshd: apt-get install openssh-server" >&2; exit 1; }
    [ $# -gt 0 ] || usage
    if ip -o addr show | grep -q ' 10\.253\.1\.1/'; then
        echo "another pair of SSH hosts is up (10.253.1.1 is taken): take it down first (ls -d /tmp/mpq-ssh-*)" >&2
        exit 1
    fi
    mkdir -p "$dir" /run/sshd
    trap 'echo "failed; cleaning up" >&2; down' ERR
    "$mpq" lab testbed up --name "$testbed" "$@" > "$dir/testbed.json"
    ssh-keygen -q -t ed25519 -N '' -f "$dir/id"
    ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
    cp "$dir/id.pub" "$dir/authorized_keys"
    k=0
    for role in server client; do
        k=$((k + 1))
        ns=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2] + "_ns"])' "$dir/testbed.json" "$role")
        veth="sh${name:0:10}$k"
        ip link add "$veth" type veth peer name mgmt netns "$ns"
        ip addr add "10.253.$k.1/30" dev "$veth"
        ip link set "$veth" up
        ip -n "$ns" addr add "10.253.$k.2/30" dev mgmt
        ip -n "$ns" link set mgmt up
        cat > "$dir/sshd_$role.conf" <<EOF
ListenAddress 10.253.$k.2:22
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $dir/sshd_$role.pid
Subsystem sftp internal-sftp
EOF
        ip netns exec "$ns" /usr/sbin/sshd -f "$dir/sshd_$role.conf" -E "$dir/sshd_$role.log"
    done
    python3 - "$dir" "$repo/implementations" <<'EOF'
import json, sys
d, impl = sys.argv[1], sys.argv[2]
tb = json.load(open(f"{d}/testbed.json"))
def host(k, role):
    return {
        "hostname": f"10.253.{k}.2", "user": "root", "port": 22, "identity": f"{d}/id",
        "ssh_options": ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"],
        "ips": [p[role] for p in tb["paths"]], "interfaces": [p["interface"] for p in tb["paths"]],
        "implementations": impl,
    }
json.dump({"server": host(1, "server"), "client": host(2, "client")}, open(f"{d}/hosts.json", "w"), indent=2)
EOF
    # Ready once both answer.
    for k in 1 2; do
        for _ in $(seq 1 100); do
            ssh -i "$dir/id" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
                -o LogLevel=ERROR "root@10.253.$k.2" true 2>/dev/null && break
            sleep 0.1
        done
    done
    echo "$dir/hosts.json"
    ;;
*) usage ;;
esac
