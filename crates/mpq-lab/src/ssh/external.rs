//! One run of an implementation folder (`transport: quic:NAME`) on the SSH testbed, as the
//! namespace testbed runs it ([`crate::netns_external`]) but on the hosts: the folder is the
//! host's own (`implementations:` in the hosts file, a checkout of this repository there,
//! built on the host by its `setup-env.sh` and `build.sh` before the first run). Per run the
//! server's host writes a random file of the run's size into `www/`, the lab copies a
//! certificate for the server's addresses to both hosts, finds a free UDP port on the server's
//! host, starts `run-server.sh` through the endpoint wrapper and waits until the port is bound,
//! then runs `run-client.sh` through the wrapper on the client's host with the interop
//! runner's variables. The download is checked by size and SHA-256 against the served file;
//! the completion time is the client process's on its host (the wrapper's `started` and
//! `ended`), start-up and handshake included, as on the namespace testbed.

use std::path::Path;
use std::time::Duration;

use super::exec::{Endpoint, SshTestbed, COMMAND_LIMIT};
use super::remote::{wait_output, Remote};
use crate::experiment::Experiment;
use crate::implementation::Implementation;
use crate::netns_exec::{last_lines, shell_word, Measured, PathCounters, DEFAULT_RUN_LIMIT};
use crate::netns_external::{carrying_paths, write_certs, FILE};
use crate::plan::RunSpec;

/// The first UDP port tried for the server; the next ones up to [`PORTS`] if it is taken.
const FIRST_PORT: u16 = 4433;
/// How many ports are tried.
const PORTS: u16 = 200;
/// How long a server may take to bind its port (Python start-up included).
const SERVER_BIND_LIMIT: Duration = Duration::from_secs(30);
/// How long writing the served file may take (a few hundred MB of random bytes).
const WRITE_LIMIT: Duration = Duration::from_secs(300);
/// How long `setup-env.sh` and `build.sh` together may take on a host (a first build).
pub const BUILD_LIMIT: Duration = Duration::from_secs(3600);

/// The folder of implementation `imp` on `r`'s host, from the hosts file.
fn folder(r: &Remote, imp: &Implementation) -> Result<String, String> {
    let root = r.host.implementations.as_ref().ok_or_else(|| {
        format!(
            "transport quic:{} runs the implementation folder on each host: give the {} host's `implementations:` in the hosts file (the implementations/ folder of a checkout of this repository there)",
            imp.name, r.role
        )
    })?;
    Ok(format!("{}/{}", root.trim_end_matches('/'), imp.name))
}

/// Runs `setup-env.sh` and `build.sh` of `imp` on `r`'s host (`mpq`: the lab's copy there,
/// handed over as `MPQ`), their output in `base/prepare-NAME.log`; says why if either fails.
pub fn prepare(r: &Remote, imp: &Implementation, base: &str) -> Result<(), String> {
    let dir = folder(r, imp)?;
    eprintln!("preparing implementation {} on the {} host ({dir})", imp.name, r.role);
    let log = format!("{base}/prepare-{}.log", imp.name);
    let script = format!(
        "cd {d} || exit 3; for s in setup-env.sh build.sh run-server.sh run-client.sh; do [ -f $s ] || {{ echo \"{d} has no $s\" >&2; exit 3; }}; done; \
         MPQ={base}/mpq bash setup-env.sh > {log} 2>&1 && MPQ={base}/mpq bash build.sh >> {log} 2>&1 || {{ tail -n 5 {log} >&2; exit 1; }}",
        d = shell_word(&dir)
    );
    r.run(&script, b"", BUILD_LIMIT)
        .map(|_| ())
        .map_err(|e| format!("preparing {} on the {} host: {e}", imp.name, r.role))
}

/// The remote shell test "UDP port `port` is bound" (`/proc/net/udp*` list local ports in
/// hex after the address's colon).
fn bound(port: u16) -> String {
    format!("grep -qi ':{port:04X} ' /proc/net/udp /proc/net/udp6 2>/dev/null")
}

impl SshTestbed {
    /// Runs `run` with the implementation folder `imp` in the run's directories `dirs`
    /// (server's, client's).
    pub(super) fn external(
        &self,
        exp: &Experiment,
        run: &RunSpec,
        imp: &Implementation,
        dirs: &[String; 2],
    ) -> Result<Measured, String> {
        let (server_host, client_host) = (&self.hosts.server, &self.hosts.client);
        let (sdir, cdir) = (&dirs[0], &dirs[1]);
        let (sbase, cbase) = (&self.bases[0], &self.bases[1]);
        let server_ips: Vec<String> = run.path_indices.iter().map(|&i| server_host.ips[i].to_string()).collect();
        let client_ips: Vec<String> = run.path_indices.iter().map(|&i| client_host.ips[i].to_string()).collect();

        // The served file, its digest, and a free port, on the server's host.
        let out = self.server.run(
            &format!(
                "cd {sdir} && mkdir -p www certs && head -c {size} /dev/urandom > www/{FILE} && sha256sum www/{FILE} && \
                 for p in $(seq {FIRST_PORT} {last}); do {test} || {{ echo port $p; exit 0; }}; done; echo 'no free UDP port' >&2; exit 1",
                size = run.size,
                last = FIRST_PORT + PORTS - 1,
                test = bound(0).replace(":0000 ", ":$(printf %04X $p) ")
            ),
            b"",
            WRITE_LIMIT,
        )?;
        let out = String::from_utf8_lossy(&out.stdout);
        let served = out.split_whitespace().next().unwrap_or_default().to_owned();
        let port: u16 = out
            .lines()
            .find_map(|l| l.strip_prefix("port ")?.trim().parse().ok())
            .ok_or_else(|| format!("no port from the server's host: {out}"))?;

        // The certificate for the server's addresses, to both hosts.
        let certs = tempfile::tempdir().map_err(|e| format!("a directory for the certificate: {e}"))?;
        write_certs(certs.path(), &server_ips)?;
        let files: Vec<std::path::PathBuf> =
            ["cert.pem", "ca.pem", "priv.key"].iter().map(|f| certs.path().join(f)).collect();
        let files: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
        self.client.run(&format!("mkdir -p {cdir}/certs {cdir}/downloads"), b"", COMMAND_LIMIT)?;
        self.server.copy_to(&files, &format!("{sdir}/certs"), COMMAND_LIMIT)?;
        self.client.copy_to(&files, &format!("{cdir}/certs"), COMMAND_LIMIT)?;

        // The interop runner's variables of a role, as `env` words.
        let vars = |role: &str, dir: &str, base: &str, extra: Vec<(&str, String)>| -> String {
            let mut v = vec![
                ("ROLE", role.to_owned()),
                ("TESTCASE", "goodput".to_owned()),
                ("CERTS", format!("{dir}/certs")),
                ("LOGS", format!("{dir}/logs")),
                ("QLOGDIR", format!("{dir}/logs/qlog")),
                ("SSLKEYLOGFILE", format!("{dir}/logs/keys.log")),
                ("MPQ", format!("{base}/mpq")),
            ];
            v.extend(extra);
            v.iter().map(|(k, x)| format!("{k}={}", shell_word(x))).collect::<Vec<_>>().join(" ")
        };
        let wildcard = if server_host.ips[run.path_indices[0]].is_ipv6() { "::" } else { "0.0.0.0" };
        let server_vars = vars(
            "server",
            sdir,
            sbase,
            vec![("WWW", format!("{sdir}/www")), ("IP", wildcard.to_owned()), ("PORT", port.to_string())],
        );
        let script = |role: &str, r: &Remote| folder(r, imp).map(|f| format!("{f}/run-{role}.sh"));
        let mut server = Endpoint {
            remote: &self.server,
            dir: sdir.clone(),
            finished: false,
            child: Some(self.server.spawn(&format!(
                "cd {sdir} && exec sh {sbase}/endpoint.sh env {server_vars} bash {} > logs/stdout.log 2> logs/stderr.log",
                shell_word(&script("server", &self.server)?)
            ))?),
        };
        // Until the port is bound, or the server gave up.
        let wait = format!(
            "cd {sdir}; i=0; while ! {test}; do \
             if [ -s ended ]; then echo 'the server exited:' >&2; tail -n 5 logs/stderr.log >&2; exit 1; fi; \
             i=$((i+1)); [ $i -lt {polls} ] || {{ echo 'the server did not bind its port in time:' >&2; tail -n 5 logs/stderr.log >&2; exit 1; }}; \
             sleep 0.02; done",
            test = bound(port),
            polls = SERVER_BIND_LIMIT.as_millis() / 20
        );
        self.server
            .run(&wait, b"", SERVER_BIND_LIMIT + COMMAND_LIMIT)
            .map_err(|e| format!("the {} server on {}: {e}", imp.name, server_host.hostname))?;

        let host_port = |ip: &str| if ip.contains(':') { format!("[{ip}]:{port}") } else { format!("{ip}:{port}") };
        let url = format!("https://{}/{FILE}", host_port(&server_ips[0]));
        let paths = imp.paths_used(client_ips.len());
        let client_vars = vars(
            "client",
            cdir,
            cbase,
            vec![
                ("REQUESTS", url.clone()),
                ("DOWNLOADS", format!("{cdir}/downloads")),
                ("CLIENT_IPS", client_ips.join(" ")),
            ],
        );
        let client_script = script("client", &self.client)?;
        let command = format!(
            "ssh {} env ROLE=client TESTCASE=goodput CLIENT_IPS='{}' REQUESTS={url} ... bash {client_script}",
            client_host.destination(),
            client_ips.join(" ")
        );
        let mut client = Endpoint {
            remote: &self.client,
            dir: cdir.clone(),
            finished: false,
            child: Some(self.client.spawn(&format!(
                "cd {cdir} && exec sh {cbase}/endpoint.sh env {client_vars} bash {} > logs/stdout.log 2> logs/stderr.log",
                shell_word(&client_script)
            ))?),
        };
        let limit = exp.max_time.unwrap_or(DEFAULT_RUN_LIMIT);
        let out = match client.child.take() {
            Some(c) => {
                wait_output(c, limit).map_err(|e| format!("the {} client (max_time {limit:?}): {e}", imp.name))?
            }
            None => return Err("the client".into()),
        };
        client.finished = true;
        server.stop()?;
        // What the client's host has: its times, the download's size and digest, its log's end.
        let got = self.client.run(
            &format!(
                "cd {cdir} && cat started ended && (stat -c %s downloads/{FILE} 2>/dev/null || echo 0) && \
                 (sha256sum downloads/{FILE} 2>/dev/null || echo none) && echo @@ && tail -n 3 logs/stderr.log"
            ),
            b"",
            COMMAND_LIMIT,
        )?;
        let got = String::from_utf8_lossy(&got.stdout);
        let (facts, log_tail) = got.split_once("@@\n").unwrap_or((&got, ""));
        if !out.status.success() {
            let why = if out.status.code() == Some(127) { "does not support the test case" } else { "failed" };
            return Err(format!("the {} client {why} ({}): {}", imp.name, out.status, last_lines(log_tail, 3)));
        }
        let facts: Vec<&str> = facts.lines().collect();
        let time = |k: usize| facts.get(k).and_then(|l| l.trim().parse::<f64>().ok());
        let duration = match (time(0), time(1)) {
            (Some(a), Some(b)) if b >= a => b - a,
            _ => return Err(format!("no start and end times of the client on its host: {facts:?}")),
        };
        let bytes: u64 = facts.get(2).and_then(|l| l.trim().parse().ok()).unwrap_or(0);
        let digest = facts.get(3).and_then(|l| l.split_whitespace().next()).unwrap_or("none");
        let same = bytes == run.size && !served.is_empty() && digest == served;

        let on_hosts = self.read_samples(run, dirs)?;
        let mut client = serde_json::json!({
            "bytes": bytes,
            "duration_s": duration,
            "goodput_bps": if duration > 0.0 { bytes as f64 * 8.0 / duration } else { 0.0 },
            "multipath": paths > 1 && carrying_paths(&on_hosts.client.per_interface) > 1,
        });
        let mut server = serde_json::json!({});
        on_hosts.add_to(&mut client, Some(&mut server));
        let links = PathCounters { delivered: on_hosts.client.per_interface.clone(), dropped: 0 };
        Ok(Measured { client, server: Some(server), links, command, verified: Some(same), pids: (0, 0) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_test_reads_hex_ports() {
        assert_eq!(bound(4433), "grep -qi ':1151 ' /proc/net/udp /proc/net/udp6 2>/dev/null");
        assert_eq!(
            bound(0).replace(":0000 ", ":$(printf %04X $p) "),
            "grep -qi ':$(printf %04X $p) ' /proc/net/udp /proc/net/udp6 2>/dev/null"
        );
    }
}
