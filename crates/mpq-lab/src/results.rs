//! The results directory: `results.jsonl` (one [`Row`] per run, appended as runs finish, the
//! record an interrupted experiment resumes from), `results.csv` (the same rows, rewritten
//! from the JSON lines at the end of a run or merge), `manifests.jsonl` (one
//! [`Manifest`](crate::manifest::Manifest) per run) and `experiment.yaml` (the file the rows
//! came from). [`merge`] joins the results of several directories (e.g. shards).

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
use crate::metrics::{fill_eben, Row};
use crate::plan::Role;

/// Rows, one JSON object per line.
pub const RESULTS_JSONL: &str = "results.jsonl";
/// Rows as CSV.
pub const RESULTS_CSV: &str = "results.csv";
/// One manifest per run, JSON lines.
pub const MANIFESTS: &str = "manifests.jsonl";
/// Copy of the experiment file.
pub const EXPERIMENT_COPY: &str = "experiment.yaml";

/// The lines of a JSON-lines file. A last line without its newline is an interrupted write:
/// with `repair` the file is cut back to the last complete line, otherwise it is skipped.
/// A missing file has no lines.
pub fn read_lines(path: &Path, repair: bool) -> Result<Vec<String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LabError::io(format!("reading {}", path.display()))(e)),
    };
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    if complete < text.len() && repair {
        let f =
            OpenOptions::new().write(true).open(path).map_err(LabError::io(format!("opening {}", path.display())))?;
        f.set_len(complete as u64).map_err(LabError::io(format!("truncating {}", path.display())))?;
    }
    Ok(text[..complete].lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect())
}

/// The rows of a results file (see [`read_lines`] for `repair`).
pub fn read_rows(path: &Path, repair: bool) -> Result<Vec<Row>> {
    read_lines(path, repair)?
        .iter()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| LabError::Other(format!("{}:{}: not a result row: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// Appends JSON lines to a file, flushing each so that an interruption loses at most the
/// line being written.
pub struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> Result<Appender> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(LabError::io(format!("opening {}", path.display())))?;
        Ok(Appender { file, path: path.to_owned() })
    }

    /// Writes one value as a line.
    pub fn append<T: serde::Serialize>(&mut self, value: &T) -> Result<()> {
        let mut line = serde_json::to_string(value).map_err(|e| LabError::Other(e.to_string()))?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(LabError::io(format!("writing {}", self.path.display())))
    }
}

/// Rewrites `dir/results.csv` from `dir/results.jsonl`.
pub fn write_csv(dir: &Path) -> Result<()> {
    let lines = read_lines(&dir.join(RESULTS_JSONL), false)?;
    let csv = crate::csv::to_csv(lines.iter().map(String::as_str)).map_err(|e| LabError::Other(e.to_string()))?;
    let path = dir.join(RESULTS_CSV);
    std::fs::write(&path, csv).map_err(LabError::io(format!("writing {}", path.display())))
}

/// What [`merge`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergeSummary {
    /// Rows written.
    pub rows: usize,
    /// Rows dropped because an earlier input had the same run ID with the same results.
    pub duplicates: usize,
    /// Run IDs that appeared with different results (the first input's row is kept).
    pub conflicts: Vec<String>,
}

fn results_file(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.join(RESULTS_JSONL)
    } else {
        input.to_owned()
    }
}

/// Joins the results of `inputs` (results directories or `results.jsonl` files) into the
/// directory `out`: rows deduplicated by run ID (first wins), EBen recomputed from the joined
/// baselines, `results.jsonl`, `results.csv` and the joined `manifests.jsonl` written.
pub fn merge(out: &Path, inputs: &[PathBuf]) -> Result<MergeSummary> {
    if inputs.is_empty() {
        return Err(LabError::Other("nothing to merge: give at least one results directory or file".into()));
    }
    let mut summary = MergeSummary::default();
    let mut rows: Vec<Row> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut manifests: BTreeMap<String, String> = BTreeMap::new();
    for input in inputs {
        let file = results_file(input);
        if !file.exists() {
            return Err(LabError::Other(format!("{}: no such results file", file.display())));
        }
        for r in read_rows(&file, false)? {
            match by_id.get(&r.run_id) {
                Some(&i) if rows[i].trace_hash == r.trace_hash && rows[i].goodput_bps == r.goodput_bps => {
                    summary.duplicates += 1
                }
                Some(_) => summary.conflicts.push(r.run_id.clone()),
                None => {
                    by_id.insert(r.run_id.clone(), rows.len());
                    rows.push(r);
                }
            }
        }
        if input.is_dir() {
            for l in read_lines(&input.join(MANIFESTS), false)? {
                let id = serde_json::from_str::<serde_json::Value>(&l)
                    .ok()
                    .and_then(|v| v.get("run_id").and_then(|s| s.as_str().map(str::to_owned)));
                if let Some(id) = id {
                    manifests.entry(id).or_insert(l);
                }
            }
        }
    }
    let snapshot = rows.clone();
    let index: HashMap<&str, &Row> = snapshot.iter().map(|r| (r.run_id.as_str(), r)).collect();
    for r in rows.iter_mut().filter(|r| r.role == Role::Multipath) {
        fill_eben(r, |id| index.get(id).copied());
    }
    std::fs::create_dir_all(out).map_err(LabError::io(format!("creating {}", out.display())))?;
    for name in [RESULTS_JSONL, MANIFESTS] {
        let p = out.join(name);
        if p.exists() {
            std::fs::remove_file(&p).map_err(LabError::io(format!("replacing {}", p.display())))?;
        }
    }
    let mut w = Appender::open(&out.join(RESULTS_JSONL))?;
    for r in &rows {
        w.append(r)?;
    }
    if !manifests.is_empty() {
        let p = out.join(MANIFESTS);
        let text: String = manifests.values().map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, text).map_err(LabError::io(format!("writing {}", p.display())))?;
    }
    write_csv(out)?;
    summary.rows = rows.len();
    Ok(summary)
}
