//! Network namespaces for the tests that need the real kernel, removed on drop (with what
//! runs in them). Needs root (or CAP_NET_ADMIN) and `ip`: [`Netns::create`] returns `None`
//! when the system does not let us, and the test says it is skipped.

use std::process::{Command, Stdio};

/// The namespaces of one run, deleted on drop (which also kills what runs in them).
pub struct Netns {
    /// Their names, in the order given to [`Netns::create`].
    pub names: Vec<String>,
}

impl Netns {
    /// Namespaces `<prefix>-<pid>-<short>` for each short name, then every `ip` command of
    /// `steps`, where `{name}` stands for the namespace of that short name; `None` if any
    /// step fails.
    pub fn create(prefix: &str, shorts: &[&str], steps: &[&str]) -> Option<Netns> {
        let tag = std::process::id();
        let names: Vec<String> = shorts.iter().map(|n| format!("{prefix}-{tag}-{n}")).collect();
        let ns = Netns { names };
        for n in &ns.names {
            if !ip(&["netns", "add", n]) {
                return None;
            }
        }
        for step in steps {
            let mut line = step.to_string();
            for (short, name) in shorts.iter().zip(&ns.names) {
                line = line.replace(&format!("{{{short}}}"), name);
            }
            let args: Vec<&str> = line.split_whitespace().collect();
            if !ip(&args) {
                eprintln!("ip {line}: failed");
                return None;
            }
        }
        Some(ns)
    }

    /// The namespace of short name `short`.
    pub fn name(&self, short_index: usize) -> &str {
        &self.names[short_index]
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            // Processes still in a namespace would keep it: kill them first.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", n]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").arg(pid).status();
                }
            }
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// Runs `ip` with `args`; true on success.
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Runs a command inside namespace `ns`; true on success.
pub fn exec_in(ns: &str, args: &[&str]) -> bool {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `mpq` inside namespace `ns`.
pub fn mpq_in(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_mpq")]).args(args);
    c
}
