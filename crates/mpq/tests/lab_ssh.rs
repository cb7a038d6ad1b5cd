//! The SSH testbed (`testbed: ssh`, `mpq lab run --hosts FILE`) against real OpenSSH servers:
//! a kernel testbed's client and server namespaces (joined through the link emulator) play
//! the two hosts, each with Debian's sshd listening on a management link from the root
//! namespace, key login only. `mpq lab run` copies itself to both over scp, runs the shipped
//! experiment's scripts and `mpq perf` there over ssh, and brings the logs back. Needs root
//! and sshd (the test command installs openssh-server); see common/testbed.rs for skipping.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[path = "common/testbed.rs"]
mod testbed;

use testbed::{available, check_cores, name, Testbed};

const SSHD: &str = "/usr/sbin/sshd";

/// An sshd in a namespace, killed on drop.
struct Sshd(Child);

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a command; panics with its output if it fails.
fn sh(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// The two "hosts": a testbed, a management link from the root namespace to each of its
/// endpoint namespaces (10.254.K.1 here, 10.254.K.2 there; K = `first` for the server,
/// `first + 1` for the client, distinct per test as they run at once) and an sshd on each.
struct Hosts {
    /// Keys, configurations and the hosts file.
    dir: tempfile::TempDir,
    // (Dropped in this order: the sshds, then the testbed, whose namespaces take the
    // management links with them.)
    _sshd: Vec<Sshd>,
    tb: Testbed,
    /// The server's K (the client's is the next).
    first: u8,
}

impl Hosts {
    fn up(short: &str, first: u8, links: &[&str]) -> Hosts {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut args = Vec::new();
        for l in links {
            args.extend(["--link", l]);
        }
        let tb = Testbed::up(&name(short), &args);
        sh("ssh-keygen", &["-q", "-t", "ed25519", "-N", "", "-f", d.join("id").to_str().unwrap()]);
        sh("ssh-keygen", &["-q", "-t", "ed25519", "-N", "", "-f", d.join("host_key").to_str().unwrap()]);
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
        // sshd's privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut sshd = Vec::new();
        for (k, role) in [(first, "server"), (first + 1, "client")] {
            let ns = tb.field(&format!("{role}_ns"));
            // Interface names unique to this test process (at most 15 bytes).
            let root_if = format!("sm{}{k}", std::process::id() % 1_000_000);
            sh("ip", &["link", "add", &root_if, "type", "veth", "peer", "name", "mgmt", "netns", &ns]);
            sh("ip", &["addr", "add", &format!("10.254.{k}.1/30"), "dev", &root_if]);
            sh("ip", &["link", "set", &root_if, "up"]);
            sh("ip", &["-n", &ns, "addr", "add", &format!("10.254.{k}.2/30"), "dev", "mgmt"]);
            sh("ip", &["-n", &ns, "link", "set", "mgmt", "up"]);
            let conf = d.join(format!("sshd_{role}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "ListenAddress 10.254.{k}.2:22\nHostKey {0}/host_key\nAuthorizedKeysFile {0}/authorized_keys\n\
                     PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     UsePAM no\nStrictModes no\nPidFile {0}/sshd_{role}.pid\nSubsystem sftp internal-sftp\n",
                    d.display()
                ),
            )
            .unwrap();
            let mut child = Command::new("ip")
                .args(["netns", "exec", &ns, SSHD, "-D", "-e", "-f", conf.to_str().unwrap()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Ready once it says it listens (-e: its log on standard error).
            let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
            let mut seen = Vec::new();
            loop {
                match lines.next() {
                    Some(Ok(l)) if l.contains("Server listening on") => break,
                    Some(Ok(l)) => seen.push(l),
                    _ => panic!("sshd in {ns} did not start: {seen:?}"),
                }
            }
            // Keep draining its log so that it never blocks on a full pipe.
            std::thread::spawn(move || for _ in lines {});
            sshd.push(Sshd(child));
        }
        Hosts { dir, _sshd: sshd, tb, first }
    }

    /// The hosts file: each namespace at its management address, its paths' addresses and
    /// interfaces from the testbed; `port` for SSH (22: where sshd listens).
    fn file(&self, port: u16) -> PathBuf {
        let d = self.dir.path();
        let host = |k: usize, role: &str| {
            let paths = self.tb.json["paths"].as_array().unwrap();
            serde_json::json!({
                "hostname": format!("10.254.{k}.2"),
                "user": "root",
                "port": port,
                "identity": d.join("id"),
                "ssh_options": ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"],
                "ips": paths.iter().map(|p| p[role].clone()).collect::<Vec<_>>(),
                "interfaces": paths.iter().map(|p| p["interface"].clone()).collect::<Vec<_>>(),
                // (Both "hosts" see this checkout.)
                "implementations": Path::new(env!("CARGO_MANIFEST_DIR")).join("../../implementations"),
            })
        };
        let path = d.join(format!("hosts-{port}.json"));
        let first = usize::from(self.first);
        let text = serde_json::json!({"server": host(first, "server"), "client": host(first + 1, "client")});
        std::fs::write(&path, text.to_string()).unwrap();
        path
    }
}

/// Whether sshd is installed; fails under MPQ_REQUIRE_NETNS (the test command installs it).
fn sshd_installed() -> bool {
    if Path::new(SSHD).exists() {
        return true;
    }
    assert!(
        std::env::var_os("MPQ_REQUIRE_NETNS").is_none(),
        "MPQ_REQUIRE_NETNS is set but {SSHD} is missing (apt-get install openssh-server)"
    );
    eprintln!("skipped: no {SSHD} (apt-get install openssh-server)");
    false
}

/// Runs this build's mpq; its output and process ID.
fn mpq_lab(args: &[&str]) -> (std::process::Output, u32) {
    let child = Command::new(env!("CARGO_BIN_EXE_mpq"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

/// `mpq lab run FILE --hosts HOSTS --quiet --out OUT EXTRA...`, which must succeed: the
/// rows it wrote, its standard error and its process ID.
fn run_on_hosts(file: &Path, hosts: &Path, out: &Path, extra: &[&str]) -> (Vec<serde_json::Value>, String, u32) {
    let mut args = vec![
        "lab",
        "run",
        file.to_str().unwrap(),
        "--hosts",
        hosts.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (o, pid) = mpq_lab(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "mpq {}: {stderr}", args.join(" "));
    let rows = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (rows, stderr, pid)
}

/// The lab's directories (`/tmp/mpq-lab-*-PID-*`) of the lab process `pid`: both namespaces
/// see this file system, so both hosts' directories show here.
fn lab_dirs(pid: u32) -> Vec<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("mpq-lab-") && n.contains(&format!("-{pid}-")))
        .collect()
}

#[test]
fn the_shipped_ssh_experiment_runs_on_two_sshd_hosts_and_leaves_nothing_behind() {
    if !available() || !sshd_installed() {
        return;
    }
    // The links the shipped file's topology describes.
    let hosts = Hosts::up("ssh", 1, &["100mbit/10ms/queue=20ms", "100mbit/10ms/queue=20ms"]);
    let out = hosts.dir.path().join("out");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/ssh-paths.yaml");
    let (rows, stderr, pid) = run_on_hosts(&file, &hosts.file(22), &out, &["--limit", "1"]);
    assert!(stderr.contains("preparing the server host 10.254.1.2"), "{stderr}");
    // One scenario: 1 and 2 paths in each of the three runtimes.
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        assert_eq!(r["error"], serde_json::Value::Null, "{r}");
        assert_eq!((r["completed"].as_bool(), r["bytes"].as_u64()), (Some(true), Some(50_000_000)), "{r}");
        // (Two 100 Mbit/s links: at most 200 Mbit/s of goodput.)
        let goodput = r["goodput_bps"].as_f64().unwrap();
        assert!(goodput > 10e6 && goodput < 200e6, "{r}");
        // CPU from `times` on the hosts, threads from their /proc: something, and less than
        // the run's wall time twice over.
        for k in ["cpu_client_s", "cpu_server_s"] {
            let cpu = r[k].as_f64().unwrap_or(-1.0);
            assert!(cpu > 0.0 && cpu < 2.0 * r["sim_wall_s"].as_f64().unwrap(), "{k}: {r}");
        }
        // Each host's cores from its /proc/stat (both "hosts" are this machine's namespaces).
        check_cores(r, "cpu_cores", r["cpu_client_s"].as_f64().unwrap());
        check_cores(r, "cpu_cores_server", r["cpu_server_s"].as_f64().unwrap());
        let threads = r["threads_client"].as_object().unwrap_or_else(|| panic!("threads_client: {r}"));
        let id = r["run_id"].as_str().unwrap();
        let server = r["threads_server"].as_object().unwrap_or_else(|| panic!("threads_server: {r}"));
        if id.ends_with("-per-path") {
            assert!(threads.contains_key("mpq-path-0") && server.contains_key("mpq-path-0"), "{r}");
        }
        // Each path's bytes from the client host's interface counters: the file and more.
        let bytes: Vec<u64> = r["path_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        assert!(bytes.iter().sum::<u64>() >= 50_000_000, "{r}");
        if id.contains("-n2-") {
            assert!(bytes.iter().all(|&b| b > 1_000_000), "both paths carry data: {r}");
        } else {
            assert!(bytes[1] < 100_000, "one path: {r}");
        }
        // Each host's logs came back: the pre- and post-run scripts' output.
        let logs = out.join("logs").join(id.replace('/', "_"));
        for role in ["server", "client"] {
            for when in ["pre", "post"] {
                let snap = std::fs::read_to_string(logs.join(role).join(format!("counters-{when}.txt")))
                    .unwrap_or_else(|e| panic!("{role} {when}: {e} in {}", logs.display()));
                assert!(snap.starts_with(&format!("# {role} ")) && snap.contains("Udp:"), "{snap}");
            }
        }
    }
    let manifest = std::fs::read_to_string(out.join("manifests.jsonl")).unwrap();
    assert!(manifest.contains("\"testbed\":\"ssh (server 10.254.1.2 Linux "), "{manifest}");
    assert!(manifest.contains("--server-addr"), "paths pair the hosts' addresses: {manifest}");
    // Nothing left on the hosts: no lab directory, no endpoint.
    assert_eq!(lab_dirs(pid), Vec::<String>::new());
    let ps = Command::new("pgrep").args(["-f", &format!("mpq-lab-ssh-paths-{pid}-")]).output().unwrap();
    assert!(ps.stdout.is_empty(), "endpoints left: {}", String::from_utf8_lossy(&ps.stdout));
}

#[test]
fn a_host_that_cannot_be_reached_fails_before_any_run_with_what_to_check() {
    if !available() || !sshd_installed() {
        return;
    }
    let hosts = Hosts::up("sshbad", 3, &["100mbit/10ms"]);
    let dir = hosts.dir.path();
    let file = dir.join("one.yaml");
    std::fs::write(
        &file,
        "name: ssh-bad\ntestbed: ssh\nworkload: {download: 1MB}\nbaselines: {single_path: false}\n\
         topology: {paths: [{rate: 100mbit, rtt: 10ms}]}\n",
    )
    .unwrap();
    let out = dir.join("out");
    // Nothing listens on port 2 of the hosts.
    let (o, pid) = mpq_lab(&[
        "lab",
        "run",
        file.to_str().unwrap(),
        "--hosts",
        hosts.file(2).to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("cannot reach or log into the server host 10.254.3.2"), "{stderr}");
    assert!(stderr.contains("without a password"), "{stderr}");
    assert!(
        !out.join("results.jsonl").exists() || std::fs::read_to_string(out.join("results.jsonl")).unwrap().is_empty()
    );
    assert_eq!(lab_dirs(pid), Vec::<String>::new());
    // And without --hosts, the file's testbed says what it needs.
    let (o, _) = mpq_lab(&["lab", "run", file.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("testbed: ssh needs --hosts FILE"));
}

#[test]
fn profiles_are_recorded_on_each_host_and_categorised() {
    if !available() || !sshd_installed() {
        return;
    }
    if std::process::Command::new("perf").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("MPQ_REQUIRE_NETNS").is_none(),
            "MPQ_REQUIRE_NETNS is set but perf is missing (apt-get install linux-perf)"
        );
        eprintln!("skipped: no perf (apt-get install linux-perf)");
        return;
    }
    let hosts = Hosts::up("sshprof", 5, &["200mbit/4ms/queue=10ms"]);
    let dir = hosts.dir.path();
    let file = dir.join("profile.yaml");
    std::fs::write(
        &file,
        "name: ssh-profile\ntestbed: ssh\nruntime: per-path\nworkload: {download: 20MB}\nbaselines: {single_path: false}\n\
         topology: {paths: [{rate: 200mbit, rtt: 4ms, queue: 10ms}]}\n",
    )
    .unwrap();
    let out = dir.join("out");
    let (rows, _, pid) = run_on_hosts(&file, &hosts.file(22), &out, &["--profile"]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!((r["completed"].as_bool(), &r["error"]), (Some(true), &serde_json::Value::Null), "{r}");
    for (key, role) in [("profile_client", "client"), ("profile_server", "server")] {
        let p = r[key].as_object().unwrap_or_else(|| panic!("{key}: {r}"));
        let total: f64 = p.values().map(|v| v.as_f64().unwrap()).sum();
        assert!((total - 100.0).abs() < 0.5, "{key} sums to {total}: {r}");
        // A 20 MB QUIC transfer spends some of its time in the AEAD and in the kernel's UDP.
        assert!(p["crypto"].as_f64().unwrap() > 0.5, "{key}: {r}");
        assert!(p["packet I/O"].as_f64().unwrap() > 1.0, "{key}: {r}");
        // perf's report came back with the host's logs.
        let logs = out.join("logs").join(r["run_id"].as_str().unwrap().replace('/', "_")).join(role);
        let report = std::fs::read_to_string(logs.join("perf-report.txt")).unwrap();
        assert!(report.contains("[.]") && report.contains("[k]"), "{report}");
    }
    // Nothing left: no lab directory, no perf recording.
    assert_eq!(lab_dirs(pid), Vec::<String>::new());
    let ps =
        Command::new("pgrep").args(["-f", "perf record -a -e cpu-clock -g --quiet -o perf.data"]).output().unwrap();
    assert!(ps.stdout.is_empty(), "perf left running: {}", String::from_utf8_lossy(&ps.stdout));
}

#[test]
fn implementation_folders_run_on_the_hosts_with_the_interop_runners_variables() {
    if !available() || !sshd_installed() {
        return;
    }
    let hosts = Hosts::up("sshimpl", 7, &["100mbit/10ms/queue=20ms", "50mbit/20ms/queue=20ms"]);
    let dir = hosts.dir.path();
    let file = dir.join("impl.yaml");
    // mpq's own folder (its build needs nothing: MPQ is the lab's copy on each host), over
    // one path and over both.
    std::fs::write(
        &file,
        "name: ssh-impl\ntestbed: ssh\nseed: 3\nworkload: {download: 4MB}\n\
         factors: {transport: [quic:mpq], initial_path: [0]}\nbaselines: {single_path: true}\nmax_time: 60s\n\
         topology: {paths: [{rate: 100mbit, rtt: 10ms, queue: 20ms}, {rate: 50mbit, rtt: 20ms, queue: 20ms}]}\n",
    )
    .unwrap();
    let out = dir.join("out");
    let (rows, stderr, pid) = run_on_hosts(&file, &hosts.file(22), &out, &[]);
    assert!(stderr.contains("preparing implementation mpq on the server host"), "{stderr}");
    assert_eq!(rows.len(), 3, "a baseline on each path and the two-path run: {rows:?}");
    for r in &rows {
        assert_eq!(r["error"], serde_json::Value::Null, "{r}");
        // Completed, and the download's SHA-256 is the served file's.
        assert_eq!((r["completed"].as_bool(), r["data_ok"].as_bool()), (Some(true), Some(true)), "{r}");
        assert_eq!(r["bytes"].as_u64(), Some(4_000_000), "{r}");
        // The client process's time on its host: more than the bytes at 150 Mbit/s take.
        let t = r["completion_s"].as_f64().unwrap();
        assert!(t > 4e6 * 8.0 / 150e6 && t < 60.0, "{r}");
        check_cores(r, "cpu_cores", r["cpu_client_s"].as_f64().unwrap());
        check_cores(r, "cpu_cores_server", r["cpu_server_s"].as_f64().unwrap());
        let bytes: Vec<u64> = r["path_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
        if r["role"] == "multipath" {
            // The lab calls a run multipath when every path delivered at least 1 % of the
            // bytes. The default min-RTT scheduler puts 1-20 % of this short download on the
            // second, slower path (measured over repeated runs; 0.99 % once in CI), so the
            // flag is checked against the shares rather than assumed.
            let shares: Vec<f64> = r["path_share"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
            assert_eq!(r["multipath"], shares.iter().all(|&s| s >= 0.01), "{r}");
            // (The second path opens after the handshake: a short download's share of it is
            // small, but both paths carry data.)
            assert!(bytes.iter().all(|&b| b > 10_000), "both paths carry data: {r}");
            assert!(r["eben"].as_f64().is_some(), "{r}");
        } else {
            assert_eq!(r["multipath"], false, "{r}");
            assert_eq!(bytes.iter().filter(|&&b| b > 100_000).count(), 1, "one path: {r}");
        }
        // The endpoints' logs came back: the server's TLS secrets, the client's qlog-less log.
        // (Run IDs name directories with anything but [A-Za-z0-9._-] as `_`.)
        let logs = out.join("logs").join(r["run_id"].as_str().unwrap().replace(['/', ':'], "_"));
        let keys = std::fs::read_to_string(logs.join("server").join("keys.log")).unwrap_or_default();
        assert!(keys.contains("CLIENT_TRAFFIC_SECRET_0"), "SSLKEYLOGFILE on the server's host: {:?}", walk(&logs));
        assert!(logs.join("client").join("stderr.log").is_file(), "{}", logs.display());
    }
    let manifest = std::fs::read_to_string(out.join("manifests.jsonl")).unwrap();
    assert!(manifest.contains("implementations/mpq/run-client.sh"), "{manifest}");
    assert_eq!(lab_dirs(pid), Vec::<String>::new());
    let ps = Command::new("pgrep").args(["-f", &format!("mpq-lab-ssh-impl-{pid}-")]).output().unwrap();
    assert!(ps.stdout.is_empty(), "endpoints left: {}", String::from_utf8_lossy(&ps.stdout));
    // Without the folders' place on the hosts, the lab says what to add before any run.
    let bare = std::fs::read_to_string(hosts.file(22)).unwrap().replace("\"implementations\"", "\"unused\"");
    let mut v: serde_json::Value = serde_json::from_str(&bare).unwrap();
    v["server"].as_object_mut().unwrap().remove("unused");
    v["client"].as_object_mut().unwrap().remove("unused");
    let bare_file = dir.join("bare.json");
    std::fs::write(&bare_file, v.to_string()).unwrap();
    let (o, _) = mpq_lab(&[
        "lab",
        "run",
        file.to_str().unwrap(),
        "--hosts",
        bare_file.to_str().unwrap(),
        "--quiet",
        "--out",
        dir.join("out2").to_str().unwrap(),
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("give the server host's `implementations:`"), "{e}");
}

/// Every file under `dir`, for messages.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}
