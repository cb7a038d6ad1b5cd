//! The SSH testbed's hosts file (seed 000 listing 4.1): for each role, the host to reach over
//! SSH, the addresses its endpoint uses (one per path, the i-th client address with the i-th
//! server address) and the interfaces that hold them. JSON or YAML:
//!
//! ```yaml
//! server:
//!   hostname: amd183.utah.cloudlab.us
//!   ips: [10.10.1.1, 10.10.2.1]
//!   interfaces: [enp65s0f0np0, enp65s0f1np1]
//! client:
//!   hostname: amd204.utah.cloudlab.us
//!   user: lab                 # optional: SSH's default otherwise
//!   port: 22                  # optional
//!   identity: ~/.ssh/lab      # optional: a private key
//!   ssh_options: ["-o", "ProxyJump=gateway"]   # optional, passed to ssh and scp
//!   workdir: /tmp             # optional: where the lab makes its directory (default /tmp)
//!   implementations: /srv/mpq/implementations   # optional: for transports quic:NAME
//!   ips: [10.10.1.2, 10.10.2.2]
//!   interfaces: [enp65s0f0np0, enp65s0f1np1]
//! ```

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Both hosts of an SSH testbed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hosts {
    /// The host of the server.
    pub server: Host,
    /// The host of the client.
    pub client: Host,
}

/// One host.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Name or address that SSH reaches the host at (its control network, not the paths').
    pub hostname: String,
    /// Login name (SSH's default, from its configuration, when absent).
    #[serde(default)]
    pub user: Option<String>,
    /// SSH port (SSH's default when absent).
    #[serde(default)]
    pub port: Option<u16>,
    /// A private key file for the login (`~/` is the home directory).
    #[serde(default)]
    pub identity: Option<PathBuf>,
    /// More options for `ssh` and `scp` (e.g. `["-o", "ProxyJump=gw"]`).
    #[serde(default)]
    pub ssh_options: Vec<String>,
    /// Directory on the host under which the lab makes its own (removed at the end).
    #[serde(default = "default_workdir")]
    pub workdir: String,
    /// The `implementations/` folder of a checkout of this repository on the host, where
    /// experiments with implementation folders (`transport: quic:NAME`) build and run them.
    #[serde(default)]
    pub implementations: Option<String>,
    /// The endpoint's addresses, one per path.
    pub ips: Vec<IpAddr>,
    /// The interfaces holding them (their counters give each path's throughput).
    pub interfaces: Vec<String>,
}

fn default_workdir() -> String {
    "/tmp".into()
}

impl Host {
    /// `[user@]hostname`, SSH's destination.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.hostname),
            None => self.hostname.clone(),
        }
    }

    /// The options both `ssh` and `scp` take: never ask for a password (fail instead), give up
    /// on an unreachable host after 10 s, then the host's own (port and key included).
    pub fn common_options(&self) -> Vec<String> {
        let mut o: Vec<String> =
            ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"].iter().map(|s| s.to_string()).collect();
        if let Some(k) = &self.identity {
            o.extend(["-i".into(), expand_home(k).display().to_string()]);
        }
        o.extend(self.ssh_options.iter().cloned());
        o
    }
}

/// `~/x` as `$HOME/x`.
fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_owned(),
    }
}

impl Hosts {
    /// Reads and checks a hosts file (JSON or YAML; JSON is YAML).
    pub fn load(path: &Path) -> Result<Hosts, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("reading the hosts file {}: {e}", path.display()))?;
        Hosts::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and checks the text of a hosts file.
    pub fn parse(text: &str) -> Result<Hosts, String> {
        let h: Hosts = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        for (role, host) in [("server", &h.server), ("client", &h.client)] {
            if host.hostname.trim().is_empty() {
                return Err(format!("{role}.hostname is empty"));
            }
            if host.ips.is_empty() {
                return Err(format!("{role}.ips: at least one address (one per path) is needed"));
            }
            if host.ips.len() != host.interfaces.len() {
                return Err(format!(
                    "{role}: {} ips but {} interfaces; give the interface of each address, in the same order",
                    host.ips.len(),
                    host.interfaces.len()
                ));
            }
            if host.workdir.is_empty() || !host.workdir.starts_with('/') || host.workdir.contains(char::is_whitespace) {
                return Err(format!("{role}.workdir: an absolute path without spaces, not {:?}", host.workdir));
            }
            if let Some(bad) = host.interfaces.iter().find(|i| !valid_interface(i)) {
                return Err(format!("{role}.interfaces: {bad:?} is not an interface name"));
            }
        }
        if h.server.ips.len() != h.client.ips.len() {
            return Err(format!(
                "the client has {} addresses and the server {}: path i joins the i-th of each, so give both the same number",
                h.client.ips.len(),
                h.server.ips.len()
            ));
        }
        Ok(h)
    }

    /// The number of paths: address pairs.
    pub fn paths(&self) -> usize {
        self.client.ips.len()
    }
}

/// A Linux interface name: 1 to 15 bytes, no slash, space or colon (it goes into shell
/// words and `/proc/net/dev` lines).
fn valid_interface(name: &str) -> bool {
    (1..=15).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic() && !b"/:'\"\\$`".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = r#"{
      "server": {"hostname": "amd183.utah.cloudlab.us", "ips": ["10.10.1.1", "10.10.2.1"],
                 "interfaces": ["enp65s0f0np0", "enp65s0f1np1"]},
      "client": {"hostname": "amd204.utah.cloudlab.us", "ips": ["10.10.1.2", "10.10.2.2"],
                 "interfaces": ["enp65s0f0np0", "enp65s0f1np1"]}
    }"#;

    #[test]
    fn seed_000s_listing_reads_as_json() {
        let h = Hosts::parse(LISTING).unwrap();
        assert_eq!(h.paths(), 2);
        assert_eq!(h.server.destination(), "amd183.utah.cloudlab.us");
        assert_eq!(h.client.ips[1].to_string(), "10.10.2.2");
        assert_eq!(h.client.workdir, "/tmp");
        assert_eq!(h.client.common_options(), ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]);
    }

    #[test]
    fn yaml_with_login_details() {
        let h = Hosts::parse(
            "server: {hostname: s, user: lab, port: 2222, identity: /k, ssh_options: [-o, ProxyJump=gw], ips: [10.0.0.1], interfaces: [eth1]}\n\
             client: {hostname: c, workdir: /var/tmp, ips: [10.0.0.2], interfaces: [eth1]}\n",
        )
        .unwrap();
        assert_eq!(h.server.destination(), "lab@s");
        assert_eq!(h.server.port, Some(2222));
        assert_eq!(&h.server.common_options()[4..], ["-i", "/k", "-o", "ProxyJump=gw"]);
        assert_eq!(h.client.workdir, "/var/tmp");
    }

    #[test]
    fn bad_files_say_what_to_fix() {
        let err = |t: &str| Hosts::parse(t).unwrap_err();
        assert!(err("server: {hostname: s, ips: [10.0.0.1], interfaces: []}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("server: 1 ips but 0 interfaces"));
        assert!(err("server: {hostname: s, ips: [10.0.0.1, 10.0.1.1], interfaces: [a, b]}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("the same number"));
        assert!(err("server: {hostname: s, ips: [10.0.0.300], interfaces: [a]}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("invalid IP address"));
        assert!(err("server: {hostname: s, ips: [10.0.0.1], interfaces: [a], colour: red}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("unknown field `colour`"));
        assert!(err("server: {hostname: s, ips: [10.0.0.1], interfaces: [\"a b\"]}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("not an interface name"));
        assert!(err("server: {hostname: s, workdir: tmp, ips: [10.0.0.1], interfaces: [a]}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("absolute path"));
        assert!(err("server: {hostname: '', ips: [10.0.0.1], interfaces: [a]}\nclient: {hostname: c, ips: [10.0.0.2], interfaces: [e]}")
            .contains("hostname is empty"));
        assert!(err("client: {hostname: c, ips: [10.0.0.2], interfaces: [e]}").contains("server"));
    }
}
