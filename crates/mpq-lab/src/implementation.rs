//! QUIC implementations the kernel testbed can run besides `mpq perf`: the folders of
//! `implementations/` (seed 001 §3.4), each with `setup-env.sh`, `build.sh`,
//! `run-server.sh` and `run-client.sh` driven by the interop runner's environment variables
//! (`implementations/README.md` is the contract). An experiment names one as the transport
//! `quic:NAME` (`quic:quinn`, `quic:noq`, `quic:mpq`...).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The transport prefix that names an implementation folder.
pub const PREFIX: &str = "quic:";

/// The variable that overrides where the implementation folders are.
pub const DIR_VAR: &str = "MPQ_IMPLEMENTATIONS";

/// The scripts every folder has.
pub const SCRIPTS: [&str; 4] = ["setup-env.sh", "build.sh", "run-server.sh", "run-client.sh"];

/// One implementation folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Implementation {
    /// The folder's name (`quinn`).
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
    /// Whether it opens a path from every client address (`multipath` in `features`).
    pub multipath: bool,
    /// The most paths it opens (`max-paths N` in `features`), when it says.
    pub max_paths: Option<usize>,
}

/// The implementation a transport names (`quic:quinn` -> `quinn`), if it names one.
pub fn name_of(transport: &str) -> Option<&str> {
    transport.strip_prefix(PREFIX)
}

/// Where the implementation folders are: `$MPQ_IMPLEMENTATIONS`, else the first
/// `implementations/` (with its `lib.sh`) in `near` or one of its parents, else in the
/// current directory or one of its parents.
pub fn root(near: &Path) -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os(DIR_VAR) {
        return Ok(PathBuf::from(d));
    }
    let look = |start: &Path| -> Option<PathBuf> {
        let start = start.canonicalize().ok()?;
        start.ancestors().map(|a| a.join("implementations")).find(|d| d.join("lib.sh").is_file())
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    look(near).or_else(|| look(&cwd)).ok_or_else(|| {
        format!(
            "no implementations/ folder (with lib.sh) above {} or the current directory; run from the mpq repository or set {DIR_VAR}",
            near.display()
        )
    })
}

impl Implementation {
    /// The folder `name` under `root`, checked: a plain name, every script present.
    pub fn open(root: &Path, name: &str) -> Result<Implementation, String> {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(format!("{name:?} is not an implementation folder name (letters, digits, - and _)"));
        }
        let dir = root.join(name);
        if !dir.is_dir() {
            let mut known: Vec<String> = std::fs::read_dir(root)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter(|e| e.path().join("run-client.sh").is_file())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            known.sort();
            return Err(format!("no implementation {name:?} in {} (there are: {})", root.display(), known.join(", ")));
        }
        for s in SCRIPTS {
            if !dir.join(s).is_file() {
                return Err(format!("{} has no {s} (see implementations/README.md)", dir.display()));
            }
        }
        let features = std::fs::read_to_string(dir.join("features")).unwrap_or_default();
        let (multipath, max_paths) =
            parse_features(&features).map_err(|e| format!("{}/features: {e}", dir.display()))?;
        Ok(Implementation { name: name.to_owned(), dir, multipath, max_paths })
    }

    /// How many of `n` paths a run of this implementation uses.
    pub fn paths_used(&self, n: usize) -> usize {
        if self.multipath {
            self.max_paths.map_or(n, |m| m.min(n))
        } else {
            n.min(1)
        }
    }

    /// Runs `setup-env.sh` then `build.sh` (both idempotent), their output on our standard
    /// error; `mpq` is handed to them as `MPQ`.
    pub fn prepare(&self, mpq: &Path) -> Result<(), String> {
        for s in ["setup-env.sh", "build.sh"] {
            let script = self.dir.join(s);
            let status = Command::new("bash")
                .arg(&script)
                .env("MPQ", mpq)
                .stdin(Stdio::null())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .status()
                .map_err(|e| format!("running {}: {e}", script.display()))?;
            if !status.success() {
                return Err(format!("{} failed ({status}); run it by hand to see why", script.display()));
            }
        }
        Ok(())
    }

    /// The script of a role (`server` or `client`).
    pub fn script(&self, role: &str) -> PathBuf {
        self.dir.join(format!("run-{role}.sh"))
    }
}

/// `multipath` and `max-paths N` from a `features` file (one per line, `#` comments).
fn parse_features(text: &str) -> Result<(bool, Option<usize>), String> {
    let (mut multipath, mut max_paths) = (false, None);
    for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("multipath"), None, None) => multipath = true,
            (Some("max-paths"), Some(n), None) => {
                max_paths = Some(
                    n.parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("max-paths {n:?}: expected a number of paths above 0"))?,
                )
            }
            _ => return Err(format!("unknown feature line {line:?}; expected `multipath` or `max-paths N`")),
        }
    }
    Ok((multipath, max_paths))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_say_multipath_and_how_many_paths() {
        assert_eq!(parse_features(""), Ok((false, None)));
        assert_eq!(parse_features("# none\nmultipath\nmax-paths 2\n"), Ok((true, Some(2))));
        assert!(parse_features("max-paths 0").is_err());
        assert!(parse_features("multipath yes").unwrap_err().contains("unknown feature"));
    }

    #[test]
    fn paths_used_follow_the_features() {
        let i = |multipath, max_paths| Implementation { name: "x".into(), dir: PathBuf::new(), multipath, max_paths };
        assert_eq!(i(false, None).paths_used(3), 1);
        assert_eq!(i(true, None).paths_used(3), 3);
        assert_eq!(i(true, Some(2)).paths_used(3), 2);
        assert_eq!(i(true, Some(2)).paths_used(1), 1);
    }

    #[test]
    fn the_repositorys_folders_open_and_bad_names_are_refused() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../implementations");
        for name in ["mpq", "quinn", "quicgo", "aioquic", "ngtcp2", "noq"] {
            let imp = Implementation::open(&root, name).unwrap();
            assert_eq!(imp.multipath, name == "mpq" || name == "noq", "{name}");
        }
        assert_eq!(Implementation::open(&root, "noq").unwrap().max_paths, Some(2));
        let e = Implementation::open(&root, "picoquic").unwrap_err();
        assert!(e.contains("quinn") && e.contains("no implementation"), "{e}");
        assert!(Implementation::open(&root, "../mpq").is_err());
        assert_eq!(name_of("quic:quinn"), Some("quinn"));
        assert_eq!(name_of("quic"), None);
    }
}
