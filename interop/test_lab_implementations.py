"""The lab's implementation folders (implementations/, issue E) on the kernel testbed: `mpq
lab run` of an experiment whose transports are every folder (`quic:NAME`), each
implementation at both ends over two emulated paths (network namespaces and the lab's link
emulator), plus the CI short form of experiments/implementations.yaml.

Checked from the results: every run (single-path baselines on each path and the two-path
run of each implementation) completed with the downloaded file byte-identical to the
served one (the lab compares them); the multipath implementations (mpq, noq) carried data
on both paths in their two-path run and say `multipath: true`; the others used one path and
say false; manifests name the kernel testbed. Needs root and /dev/net/tun (skipped
otherwise, failed instead under MPQ_REQUIRE_NETNS=1, as scripts/test.sh sets as root).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from test_interop import REPO, find_mpq

pytestmark = pytest.mark.mpq

IMPLEMENTATIONS = ("mpq", "quinn", "quicgo", "aioquic", "ngtcp2", "noq")
MULTIPATH = {"mpq", "noq"}

EXPERIMENT = """\
name: implementations-test
testbed: netns
seed: 11
workload: {download: 3MB}
factors:
  transport: [%s]
  initial_path: [0]
baselines: {single_path: true}
max_time: 60s
topology:
  paths:
    - {rate: 60mbit, rtt: 10ms, queue: 20ms}
    - {rate: 40mbit, rtt: 20ms, queue: 20ms}
""" % ", ".join(f"quic:{i}" for i in IMPLEMENTATIONS)


def netns_available() -> bool:
    return os.geteuid() == 0 and Path("/dev/net/tun").exists()


@pytest.fixture
def mpq() -> Path:
    if not netns_available():
        if os.environ.get("MPQ_REQUIRE_NETNS") == "1":
            pytest.fail("the kernel testbed needs root and /dev/net/tun (MPQ_REQUIRE_NETNS=1)")
        pytest.skip("the kernel testbed needs root and /dev/net/tun")
    p = find_mpq()
    if p is None:
        pytest.skip("no mpq binary (cargo build --release -p mpq, or MPQ_BIN)")
    return p


def lab_run(mpq: Path, experiment: Path, out: Path, *extra: str) -> list[dict]:
    """Runs the experiment; checks that the run left none of its testbeds behind."""
    proc = subprocess.Popen(
        [str(mpq), "lab", "run", str(experiment), "--out", str(out), *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 0, f"mpq lab run failed ({proc.returncode}):\n{stderr[-3000:]}"
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [n for n in ns if n.startswith(f"mpqlab-lab{proc.pid}-")], ns
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_every_implementation_downloads_byte_exact_over_one_and_two_paths(mpq: Path, tmp_path: Path):
    exp = tmp_path / "implementations-test.yaml"
    exp.write_text(EXPERIMENT)
    rows = lab_run(mpq, exp, tmp_path / "out")
    assert len(rows) == 3 * len(IMPLEMENTATIONS), [r["run_id"] for r in rows]
    for r in rows:
        assert r["completed"] and r["data_ok"] and not r.get("error"), r
        assert r["bytes"] == 3_000_000, r
        assert r["cpu_client_s"] > 0 and r["cpu_server_s"] > 0, r
    for name in IMPLEMENTATIONS:
        mp = [r for r in rows if r["transport"] == f"quic:{name}" and r["role"] == "multipath"]
        assert len(mp) == 1, [r["run_id"] for r in rows]
        r = mp[0]
        if name in MULTIPATH:
            assert r["multipath"] and min(r["path_share"]) > 0.01, r
        else:
            assert not r["multipath"] and r["path_share"][1] < 0.01, r
        assert r.get("eben") is not None, r
        base = [b for b in rows if b["transport"] == f"quic:{name}" and b["role"] == "baseline"]
        assert sorted(b["initial_path"] for b in base) == [0, 1], base
    manifests = [json.loads(line) for line in (tmp_path / "out/manifests.jsonl").read_text().splitlines()]
    assert all("netns" in m["testbed"] for m in manifests), manifests[0]


def test_the_shipped_experiment_short_form_and_its_report(mpq: Path, tmp_path: Path):
    out = tmp_path / "out"
    rows = lab_run(mpq, REPO / "experiments/implementations.yaml", out, "--limit", "1")
    assert {r["transport"] for r in rows} == {f"quic:{i}" for i in IMPLEMENTATIONS}
    assert all(r["completed"] and r["data_ok"] for r in rows), [r for r in rows if not r["data_ok"]]
    report = subprocess.run([str(mpq), "lab", "report", str(out)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text()
    assert page.count("<svg") >= 2, "report without figures"
    # One variant per implementation: the transport names them apart.
    for name in IMPLEMENTATIONS:
        assert f"quic:{name}" in page, name


@pytest.fixture
def ssh_hosts(mpq: Path):
    """Two SSH hosts on this machine (scripts/ssh-hosts-local.sh: sshd in each endpoint
    namespace of a kernel testbed with the shipped file's links); removed afterwards."""
    if not Path("/usr/sbin/sshd").exists():
        if os.environ.get("MPQ_REQUIRE_NETNS") == "1":
            pytest.fail("MPQ_REQUIRE_NETNS=1 but no /usr/sbin/sshd (apt-get install openssh-server)")
        pytest.skip("no /usr/sbin/sshd")
    name = f"i{os.getpid() % 100000}"
    script = REPO / "scripts/ssh-hosts-local.sh"
    env = {**os.environ, "MPQ": str(mpq)}
    up = subprocess.run(
        [str(script), "up", name, "--link", "200mbit/20ms/queue=20ms", "--link", "100mbit/40ms/queue=40ms"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    try:
        assert up.returncode == 0, up.stderr
        yield Path(up.stdout.strip().splitlines()[-1])
    finally:
        down = subprocess.run([str(script), "down", name], capture_output=True, text=True, timeout=60, env=env)
        assert down.returncode == 0, down.stderr
        assert not Path(f"/tmp/mpq-ssh-{name}").exists()


def test_the_ssh_experiment_short_form_runs_every_implementation_on_two_hosts(mpq: Path, ssh_hosts: Path, tmp_path: Path):
    out = tmp_path / "out"
    rows = lab_run(mpq, REPO / "experiments/implementations-ssh.yaml", out, "--limit", "1", "--hosts", str(ssh_hosts))
    # The first scenario: one path, every implementation's run on it.
    assert {r["transport"] for r in rows} == {f"quic:{i}" for i in IMPLEMENTATIONS}
    for r in rows:
        assert r["completed"] and r["data_ok"] and not r.get("error"), r
        assert r["bytes"] == 20_000_000 and r["path_bytes"][0] >= 20_000_000, r
        # Both hosts' cores, one share per core of this machine.
        assert len(r["cpu_cores"]) == len(r["cpu_cores_server"]) == os.cpu_count(), r
        assert r["cpu_client_s"] > 0 and r["cpu_server_s"] > 0, r
    manifests = [json.loads(line) for line in (out / "manifests.jsonl").read_text().splitlines()]
    assert all(m["testbed"].startswith("ssh (server 10.253.1.2") for m in manifests), manifests[0]
    report = subprocess.run([str(mpq), "lab", "report", str(out)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "CPU use per core" in (out / "report.html").read_text()
