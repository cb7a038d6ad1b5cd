//! Per-run manifests: what ran (the `mpq sim` command that repeats it, the scenario, the
//! seed) and with what (mpq version and git commit), one JSON line per run in
//! `manifests.jsonl`.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// One run's provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Run ID.
    pub run_id: String,
    /// Experiment name.
    pub experiment: String,
    /// FNV-1a hash of the experiment file's text (hex).
    pub experiment_hash: String,
    /// Scenario ID.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Testbed (`sim`, or `netns (Linux RELEASE)`).
    pub testbed: String,
    /// The command line that repeats the run (`mpq sim ...`; on the kernel testbed, the
    /// client's `mpq perf client ...`).
    pub command: String,
    /// mpq version.
    pub mpq_version: String,
    /// Git commit the lab was built from, or `unknown`.
    pub git_commit: String,
}

impl Manifest {
    /// The manifest of `run` of `scenario` in `exp`, made on `testbed` by `command`, with this
    /// build's version and commit.
    pub fn of_run(
        exp: &crate::experiment::Experiment,
        scenario: &crate::plan::PlannedScenario,
        run: &crate::plan::RunSpec,
        testbed: String,
        command: String,
    ) -> Self {
        Manifest {
            run_id: run.id.clone(),
            experiment: exp.name.clone(),
            experiment_hash: fnv1a_hex(&exp.text),
            scenario: scenario.id.clone(),
            seed: scenario.seed,
            testbed,
            command,
            mpq_version: version().into(),
            git_commit: git_commit().into(),
        }
    }
}

/// The crate version (the workspace's).
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The git commit: recorded at build time, else asked of git in the current directory,
/// else `unknown`.
pub fn git_commit() -> &'static str {
    static COMMIT: OnceLock<String> = OnceLock::new();
    COMMIT.get_or_init(|| {
        if let Some(c) = option_env!("MPQ_GIT_COMMIT") {
            return c.to_owned();
        }
        std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unknown".into())
    })
}

/// 64-bit FNV-1a of `text`, hex: identifies an experiment file's exact content.
pub fn fnv1a_hex(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_values() {
        assert_eq!(fnv1a_hex(""), "cbf29ce484222325");
        assert_eq!(fnv1a_hex("a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn commit_is_a_hash_or_unknown() {
        let c = git_commit();
        assert!(c == "unknown" || (c.len() == 40 && c.chars().all(|ch| ch.is_ascii_hexdigit())), "{c}");
    }
}
