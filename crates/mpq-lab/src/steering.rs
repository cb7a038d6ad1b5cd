//! Receive steering on the namespace testbed (seed 000 experiment 3, issue E's settings):
//! the kernel's Receive Packet Steering (RPS) and Receive Flow Steering (RFS) on the
//! endpoints' path interfaces, per run (`factors.steering`).
//!
//! - `default`: the kernel's settings, untouched (no RPS: a packet is processed on the CPU
//!   that received it, for veth the sender's).
//! - `rps`: every receive queue of every path interface in both endpoint namespaces spreads
//!   packets over all online CPUs by flow hash (`queues/rx-N/rps_cpus`).
//! - `rfs`: RPS, plus RFS: the kernel steers each flow to the CPU where the socket's reader
//!   last ran (`rps_flow_cnt` per queue, and the system-wide
//!   `net.core.rps_sock_flow_entries`, restored after the run).
//!
//! XPS (transmit queue selection by CPU) has nothing to choose on the testbed: a veth device
//! has one transmit queue.

use std::path::Path;
use std::process::Command;

/// The steering settings a run may take.
pub const STEERINGS: &[&str] = &["default", "rps", "rfs"];

/// Entries of RFS's socket flow table, and of each queue's flow table.
const FLOW_ENTRIES: u32 = 32768;
/// The system-wide socket flow table's size.
const SOCK_FLOW_ENTRIES: &str = "/proc/sys/net/core/rps_sock_flow_entries";

/// The CPU mask of `n` CPUs as sysfs writes it: hexadecimal groups of 32 bits, the highest
/// first, separated by commas (`f`, `ffffffff,ffffffff`, `1,ffffffff`).
pub fn cpu_mask(n: usize) -> String {
    let n = n.max(1);
    let groups = n.div_ceil(32);
    (0..groups)
        .rev()
        .map(|g| {
            let bits = (n - g * 32).min(32);
            let v: u64 = (1u64 << bits) - 1;
            if g == groups - 1 {
                format!("{v:x}")
            } else {
                format!("{v:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// One more than the highest online CPU's number (`/sys/devices/system/cpu/online`, e.g.
/// `0-1` or `0,2-5`), so that a mask of that many bits covers every online CPU.
fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| highest_cpu(&s))
        .map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |max| max + 1)
}

/// The highest CPU number of a kernel CPU list (`0-3,8,10-11`).
fn highest_cpu(list: &str) -> Option<usize> {
    list.trim().split(',').filter_map(|r| r.rsplit('-').next()?.trim().parse::<usize>().ok()).max()
}

/// A steering applied to a testbed; restores the system-wide setting it changed when
/// dropped (the per-interface settings go with the namespaces).
#[derive(Debug)]
pub struct Applied {
    /// The system-wide socket flow table's size before, if RFS changed it.
    old_sock_flow_entries: Option<String>,
}

impl Drop for Applied {
    fn drop(&mut self) {
        if let Some(old) = self.old_sock_flow_entries.take() {
            if let Err(e) = std::fs::write(SOCK_FLOW_ENTRIES, &old) {
                eprintln!("warning: restoring {SOCK_FLOW_ENTRIES} to {}: {e}", old.trim());
            }
        }
    }
}

/// Applies `kind` (one of [`STEERINGS`], or empty for `default`) to the interfaces `ifaces`
/// of each namespace of `namespaces`. Fails with what could not be set.
pub fn apply(kind: &str, namespaces: &[&str], ifaces: &[String]) -> Result<Applied, String> {
    let mut applied = Applied { old_sock_flow_entries: None };
    let (rps, rfs) = match kind {
        "" | "default" => return Ok(applied),
        "rps" => (true, false),
        "rfs" => (true, true),
        other => return Err(format!("unknown steering {other:?}; expected one of {}", STEERINGS.join(", "))),
    };
    if rfs {
        let old = std::fs::read_to_string(SOCK_FLOW_ENTRIES)
            .map_err(|e| format!("RFS needs {SOCK_FLOW_ENTRIES} (a kernel with RPS): {e}"))?;
        std::fs::write(SOCK_FLOW_ENTRIES, FLOW_ENTRIES.to_string())
            .map_err(|e| format!("setting {SOCK_FLOW_ENTRIES}: {e}"))?;
        applied.old_sock_flow_entries = Some(old);
    }
    let mask = cpu_mask(online_cpus());
    for ns in namespaces {
        let mut script = String::from("set -e\n");
        for i in ifaces {
            // (Interface names come from the testbed: no shell quoting needed, checked anyway.)
            if !i.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
                return Err(format!("{i:?}: not an interface name"));
            }
            script.push_str(&format!("for q in /sys/class/net/{i}/queues/rx-*; do\n"));
            if rps {
                script.push_str(&format!("  echo {mask} > $q/rps_cpus\n"));
            }
            if rfs {
                script.push_str(&format!("  echo {FLOW_ENTRIES} > $q/rps_flow_cnt\n"));
            }
            script.push_str("done\n");
        }
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c", &script])
            .output()
            .map_err(|e| format!("ip netns exec {ns}: {e}"))?;
        if !out.status.success() {
            return Err(format!("steering {kind} in {ns}: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
    }
    Ok(applied)
}

/// Reads a receive queue's steering inside namespace `ns`: `(rps_cpus, rps_flow_cnt)`.
pub fn read_queue(ns: &str, iface: &str, queue: usize) -> Result<(String, String), String> {
    let dir = Path::new("/sys/class/net").join(iface).join("queues").join(format!("rx-{queue}"));
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(dir.join("rps_cpus"))
        .arg(dir.join("rps_flow_cnt"))
        .output()
        .map_err(|e| format!("ip netns exec {ns}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().map(|l| l.trim().to_owned());
    match (lines.next(), lines.next()) {
        (Some(a), Some(b)) if out.status.success() => Ok((a, b)),
        _ => Err(format!("reading {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr).trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_are_sysfs_groups_of_32_bits() {
        assert_eq!(cpu_mask(1), "1");
        assert_eq!(cpu_mask(2), "3");
        assert_eq!(cpu_mask(4), "f");
        assert_eq!(cpu_mask(32), "ffffffff");
        assert_eq!(cpu_mask(33), "1,ffffffff");
        assert_eq!(cpu_mask(64), "ffffffff,ffffffff");
        assert_eq!(cpu_mask(72), "ff,ffffffff,ffffffff");
        assert_eq!(cpu_mask(0), "1");
    }

    #[test]
    fn the_highest_online_cpu_comes_from_the_kernels_list() {
        assert_eq!(highest_cpu("0-1\n"), Some(1));
        assert_eq!(highest_cpu("0,2-5"), Some(5));
        assert_eq!(highest_cpu("0-3,8,10-11"), Some(11));
        assert_eq!(highest_cpu(""), None);
    }

    #[test]
    fn default_changes_nothing_and_unknown_kinds_are_refused() {
        let a = apply("default", &["no-such-namespace"], &["path0".into()]).unwrap();
        assert!(a.old_sock_flow_entries.is_none());
        assert!(apply("", &[], &[]).is_ok());
        assert!(apply("xps", &[], &[]).unwrap_err().contains("expected one of default, rps, rfs"));
    }
}
