//! `mpq lab submit --slurm`: a plan as a Slurm job array, one shard per array task
//! (`mpq lab run FILE --shard K/N --out DIR/shard-K`), and a job that depends on the whole
//! array (`afterok`) and merges the shards into `DIR/merged` and renders its report. Scripts
//! are written to `DIR/slurm/` and submitted with `sbatch --parsable`.
//!
//! Every path in the scripts is absolute: the compute nodes must see the mpq binary, the
//! experiment file and DIR at the same paths (a shared file system, as on clusters).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{LabError, Result};

/// A Slurm submission of an experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmJob {
    /// The mpq binary the jobs run (absolute).
    pub mpq: PathBuf,
    /// The experiment file (absolute).
    pub file: PathBuf,
    /// Results directory (absolute): `shard-K/` per task, `merged/`, `slurm/`.
    pub out: PathBuf,
    /// Array tasks (shards), at least 1.
    pub shards: usize,
    /// Partition (`#SBATCH --partition`), or the cluster's default.
    pub partition: Option<String>,
    /// CPUs per array task; each shard runs that many simulations at once.
    pub cpus_per_task: usize,
    /// Job name.
    pub name: String,
}

/// Job IDs of a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The array job.
    pub array: String,
    /// The merge job (runs after every array task succeeded).
    pub merge: String,
}

/// `s` quoted for a POSIX shell (single quotes; a quote inside becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn q(p: &Path) -> String {
    shell_quote(&p.display().to_string())
}

/// The job ID in `sbatch --parsable` output (`ID` or `ID;CLUSTER`).
pub fn parse_job_id(stdout: &str) -> Result<String> {
    let id = stdout.trim().split(';').next().unwrap_or("").trim();
    if !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()) {
        Ok(id.to_owned())
    } else {
        Err(LabError::Other(format!("sbatch --parsable printed {:?}, not a job ID", stdout.trim())))
    }
}

impl SlurmJob {
    /// Checks the settings (shards and CPUs at least 1, absolute paths).
    pub fn check(&self) -> Result<()> {
        if self.shards == 0 {
            return Err(LabError::Other("--shards must be at least 1".into()));
        }
        if self.cpus_per_task == 0 {
            return Err(LabError::Other("--cpus-per-task must be at least 1".into()));
        }
        for p in [&self.mpq, &self.file, &self.out] {
            if !p.is_absolute() {
                return Err(LabError::Other(format!("{}: Slurm scripts need absolute paths", p.display())));
            }
        }
        Ok(())
    }

    /// The directory of the scripts and the jobs' logs.
    pub fn script_dir(&self) -> PathBuf {
        self.out.join("slurm")
    }

    fn header(&self, o: &mut String, name: &str, log: &str) {
        o.push_str("#!/bin/bash\n");
        o.push_str(&format!("#SBATCH --job-name={name}\n"));
        o.push_str(&format!("#SBATCH --output={}\n", self.script_dir().join(log).display()));
        if let Some(p) = &self.partition {
            o.push_str(&format!("#SBATCH --partition={p}\n"));
        }
    }

    /// The array job's script: task `T` (0-based) runs shard `T+1` of `shards`.
    pub fn array_script(&self) -> String {
        let mut o = String::new();
        self.header(&mut o, &self.name, "shard-%a.out");
        o.push_str(&format!("#SBATCH --array=0-{}\n", self.shards - 1));
        o.push_str(&format!("#SBATCH --cpus-per-task={}\n", self.cpus_per_task));
        o.push_str("# Written by mpq lab submit --slurm: one shard of the plan per array task.\n");
        o.push_str("set -euo pipefail\n");
        o.push_str("K=$((SLURM_ARRAY_TASK_ID+1))\n");
        o.push_str(&format!(
            "exec {} lab run {} --shard \"$K/{}\" --out {}/shard-\"$K\" --jobs \"${{SLURM_CPUS_PER_TASK:-{}}}\" --quiet\n",
            q(&self.mpq),
            q(&self.file),
            self.shards,
            q(&self.out),
            self.cpus_per_task
        ));
        o
    }

    /// The merge job's script: joins every shard into `DIR/merged` and renders its report.
    pub fn merge_script(&self) -> String {
        let mut o = String::new();
        self.header(&mut o, &format!("{}-merge", self.name), "merge.out");
        o.push_str("# Written by mpq lab submit --slurm: runs after every array task succeeded.\n");
        o.push_str("set -euo pipefail\n");
        let shards: Vec<String> = (1..=self.shards).map(|k| q(&self.out.join(format!("shard-{k}")))).collect();
        let merged = q(&self.out.join("merged"));
        o.push_str(&format!("{} lab merge {merged} {}\n", q(&self.mpq), shards.join(" ")));
        o.push_str(&format!("{} lab report {merged}\n", q(&self.mpq)));
        o
    }

    /// Writes both scripts into [`script_dir`](Self::script_dir) and returns their paths
    /// (array, merge).
    pub fn write_scripts(&self) -> Result<(PathBuf, PathBuf)> {
        let dir = self.script_dir();
        std::fs::create_dir_all(&dir).map_err(LabError::io(format!("creating {}", dir.display())))?;
        let (a, m) = (dir.join("array.sbatch"), dir.join("merge.sbatch"));
        for (p, text) in [(&a, self.array_script()), (&m, self.merge_script())] {
            std::fs::write(p, text).map_err(LabError::io(format!("writing {}", p.display())))?;
        }
        Ok((a, m))
    }

    /// Writes the scripts and submits them with `sbatch` (the array, then the merge job
    /// with `--dependency=afterok:ARRAY`).
    pub fn submit(&self, sbatch: &Path) -> Result<Submitted> {
        self.check()?;
        let (a, m) = self.write_scripts()?;
        let array = sbatch_run(sbatch, &[], &a)?;
        let merge = sbatch_run(sbatch, &[format!("--dependency=afterok:{array}")], &m)?;
        Ok(Submitted { array, merge })
    }
}

fn sbatch_run(sbatch: &Path, args: &[String], script: &Path) -> Result<String> {
    let out = Command::new(sbatch).arg("--parsable").args(args).arg(script).output().map_err(|e| {
        LabError::Other(format!(
            "running {}: {e} (is Slurm installed? scripts/slurm-single-node.sh starts a single-node Slurm)",
            sbatch.display()
        ))
    })?;
    if !out.status.success() {
        return Err(LabError::Other(format!(
            "{} {}: {}: {}",
            sbatch.display(),
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_job_id(&String::from_utf8_lossy(&out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> SlurmJob {
        SlurmJob {
            mpq: "/opt/mpq/bin/mpq".into(),
            file: "/x/it's.yaml".into(),
            out: "/r/e1".into(),
            shards: 3,
            partition: Some("lab".into()),
            cpus_per_task: 2,
            name: "mpq-lab-e1".into(),
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn job_ids() {
        assert_eq!(parse_job_id("1234\n").unwrap(), "1234");
        assert_eq!(parse_job_id("77;cluster\n").unwrap(), "77");
        assert!(parse_job_id("Submitted batch job 5").is_err());
        assert!(parse_job_id("").is_err());
    }

    #[test]
    fn array_script_runs_one_shard_per_task() {
        let s = job().array_script();
        assert!(s.starts_with("#!/bin/bash\n"));
        for line in [
            "#SBATCH --array=0-2\n",
            "#SBATCH --partition=lab\n",
            "#SBATCH --cpus-per-task=2\n",
            "#SBATCH --output=/r/e1/slurm/shard-%a.out\n",
            "K=$((SLURM_ARRAY_TASK_ID+1))\n",
            r#"exec '/opt/mpq/bin/mpq' lab run '/x/it'\''s.yaml' --shard "$K/3" --out '/r/e1'/shard-"$K" --jobs "${SLURM_CPUS_PER_TASK:-2}" --quiet"#,
        ] {
            assert!(s.contains(line), "{line} missing from\n{s}");
        }
    }

    #[test]
    fn merge_script_joins_every_shard() {
        let s = job().merge_script();
        assert!(
            s.contains("'/opt/mpq/bin/mpq' lab merge '/r/e1/merged' '/r/e1/shard-1' '/r/e1/shard-2' '/r/e1/shard-3'\n")
        );
        assert!(s.contains("'/opt/mpq/bin/mpq' lab report '/r/e1/merged'\n"));
        assert!(!s.contains("--array"));
    }

    #[test]
    fn bad_settings() {
        let mut j = job();
        j.shards = 0;
        assert!(j.check().unwrap_err().to_string().contains("--shards"));
        let mut j = job();
        j.out = "rel".into();
        assert!(j.check().unwrap_err().to_string().contains("absolute"));
        let mut j = job();
        j.cpus_per_task = 0;
        assert!(j.check().unwrap_err().to_string().contains("--cpus-per-task"));
        assert!(job().check().is_ok());
    }
}
