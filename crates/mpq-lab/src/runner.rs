//! `mpq lab run`: runs the selected scenarios of a plan in parallel (one scenario per worker
//! at a time, its baselines first so that its multipath rows get their EBen), appends one row
//! and one manifest per run as runs finish, and skips runs whose rows exist: an interrupted
//! experiment resumes where it stopped. Ends by rewriting `results.csv`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{LabError, Result};
use crate::exec::execute;
use crate::experiment::Experiment;
use crate::file::Testbed;
use crate::manifest::Manifest;
use crate::metrics::{fill_eben, Row};
use crate::plan::{Plan, Role};
use crate::results::{read_lines, read_rows, write_csv, Appender, EXPERIMENT_COPY, MANIFESTS, RESULTS_JSONL};
use crate::shard::Shard;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Only the first N scenarios of the plan.
    pub limit: Option<usize>,
    /// Only one slice of them.
    pub shard: Option<Shard>,
    /// Results directory.
    pub out: PathBuf,
    /// Worker threads.
    pub jobs: usize,
    /// Show a progress bar (on a terminal).
    pub progress: bool,
    /// Write each run's qlog files into this directory (see [`crate::qlog`]).
    pub qlog: Option<PathBuf>,
    /// Kernel testbed: record each endpoint with `perf record -e cpu-clock -g` into
    /// `OUT/profiles/RUN_ID/` and put its categorised profile into the row.
    pub profile: bool,
    /// The `mpq` binary the kernel testbed's runs start (its emulator, `mpq perf` at both
    /// ends); `None`: the running program. The simulator does not use it.
    pub mpq: Option<PathBuf>,
    /// The hosts file of the SSH testbed (`testbed: ssh` needs one).
    pub hosts: Option<PathBuf>,
}

impl RunOptions {
    /// Every scenario into `out`, on `jobs` threads, quietly: no qlog, no profiles, this
    /// program as `mpq`.
    pub fn new(out: &Path, jobs: usize) -> RunOptions {
        RunOptions {
            limit: None,
            shard: None,
            out: out.to_owned(),
            jobs,
            progress: false,
            qlog: None,
            profile: false,
            mpq: None,
            hosts: None,
        }
    }
}

/// What a run of the runner did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Scenarios selected.
    pub scenarios: usize,
    /// Runs in them.
    pub runs: usize,
    /// Runs skipped because their rows existed.
    pub skipped: usize,
    /// Runs done now.
    pub ran: usize,
    /// Runs done now that failed (error, incomplete or corrupt data).
    pub failed: usize,
    /// Sum of the simulations' wall times, seconds.
    pub sim_wall_s: f64,
}

/// The default results directory of an experiment: `lab-results/NAME`, or
/// `lab-results/NAME/shard-I-of-N` for a slice.
pub fn default_out(exp: &Experiment, shard: Option<Shard>) -> PathBuf {
    let base = Path::new("lab-results").join(&exp.name);
    match shard {
        Some(s) => base.join(format!("shard-{}-of-{}", s.index, s.count)),
        None => base,
    }
}

/// Makes `out` and checks it holds results of this very experiment file (or none).
fn prepare_out(exp: &Experiment, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).map_err(LabError::io(format!("creating {}", out.display())))?;
    let copy = out.join(EXPERIMENT_COPY);
    match std::fs::read_to_string(&copy) {
        Ok(t) if t == exp.text => Ok(()),
        Ok(_) => Err(LabError::Other(format!(
            "{} holds results of another version of the experiment file ({}); use another --out, or remove it",
            out.display(),
            copy.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&copy, &exp.text).map_err(LabError::io(format!("writing {}", copy.display())))
        }
        Err(e) => Err(LabError::io(format!("reading {}", copy.display()))(e)),
    }
}

fn failed(r: &Row) -> bool {
    r.error.is_some() || !r.completed || !r.data_ok
}

/// Runs the scenarios of `plan` that `opts` selects; see the [module docs](self).
pub fn run(exp: &Experiment, plan: &Plan, opts: &RunOptions) -> Result<RunSummary> {
    let kernel = exp.testbed.is_kernel();
    let netns = exp.testbed == Testbed::Netns;
    let hosts = match (&opts.hosts, exp.testbed) {
        (Some(h), Testbed::Ssh) => Some(crate::ssh::Hosts::load(h).map_err(LabError::Other)?),
        (None, Testbed::Ssh) => {
            return Err(LabError::Other(format!(
                "{}: testbed: ssh needs --hosts FILE (the two hosts, their addresses and interfaces; docs/lab-experiment-files.md)",
                exp.path.display()
            )))
        }
        (Some(_), _) => return Err(LabError::Other("--hosts is for experiment files with testbed: ssh".into())),
        (None, _) => None,
    };
    if netns {
        crate::netns_exec::check(exp, plan).map_err(LabError::Other)?;
    }
    if let Some(h) = &hosts {
        crate::ssh::check(exp, plan, h).map_err(LabError::Other)?;
    }
    let mpq = match &opts.mpq {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(LabError::io("finding the running mpq binary"))?,
    };
    if netns {
        crate::netns_exec::prepare(exp, &mpq).map_err(LabError::Other)?;
    }
    if opts.profile && !kernel {
        return Err(LabError::Other(
            "--profile records endpoints on the kernel testbeds (testbed: netns or ssh) only".into(),
        ));
    }
    if opts.profile && netns && !crate::profile::available() {
        return Err(LabError::Other("--profile needs perf (Debian: apt-get install linux-perf)".into()));
    }
    let profiles = opts.profile.then(|| opts.out.join("profiles"));
    prepare_out(exp, &opts.out)?;
    let ssh = match hosts {
        Some(h) => {
            // Ctrl-C, SIGTERM and SIGHUP stop the experiment after the current run's cleanup
            // on the hosts, instead of leaving their endpoints and directories behind.
            crate::testbed::sys::catch_stop_signals(true);
            Some(
                crate::ssh::SshTestbed::prepare(exp, &mpq, h, &opts.out.join("logs"), opts.profile)
                    .map_err(LabError::Other)?,
            )
        }
        None => None,
    };
    if let Some(q) = &opts.qlog {
        std::fs::create_dir_all(q).map_err(LabError::io(format!("creating the qlog directory {}", q.display())))?;
    }
    let results = opts.out.join(RESULTS_JSONL);
    let existing: HashMap<String, Row> =
        read_rows(&results, true)?.into_iter().map(|r| (r.run_id.clone(), r)).collect();
    read_lines(&opts.out.join(MANIFESTS), true)?;
    let selected = plan.select(opts.limit, opts.shard);
    let runs: usize = selected.iter().map(|&k| plan.scenarios[k].runs.len()).sum();
    let tasks: Vec<usize> = selected
        .iter()
        .copied()
        .filter(|&k| plan.scenarios[k].runs.iter().any(|r| !existing.contains_key(&r.id)))
        .collect();
    let todo: usize =
        tasks.iter().map(|&k| plan.scenarios[k].runs.iter().filter(|r| !existing.contains_key(&r.id)).count()).sum();
    let mut summary =
        RunSummary { scenarios: selected.len(), runs, skipped: runs - todo, ran: 0, failed: 0, sim_wall_s: 0.0 };
    let bar = if opts.progress && std::io::stderr().is_terminal() {
        let b = ProgressBar::new(todo as u64);
        b.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} runs, ETA {eta} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let mut rows_out = Appender::open(&results)?;
    let mut manifests_out = Appender::open(&opts.out.join(MANIFESTS))?;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // The kernel testbed runs in real time on this machine's cores: one run at a time, so
    // that runs do not take CPU from each other.
    let jobs = if kernel { 1 } else { opts.jobs.max(1).min(tasks.len().max(1)) };
    let (tx, rx) = mpsc::channel::<(Row, Manifest)>();
    let outcome = std::thread::scope(|s| -> Result<()> {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (next, stop, tasks, existing, mpq, profiles, ssh) =
                (&next, &stop, &tasks, &existing, &mpq, &profiles, &ssh);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(&k) = tasks.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
                    let sc = &plan.scenarios[k];
                    let mut done: HashMap<String, Row> = HashMap::new();
                    for run in &sc.runs {
                        if let Some(r) = existing.get(&run.id) {
                            done.insert(run.id.clone(), r.clone());
                            continue;
                        }
                        let (mut row, manifest) = if kernel {
                            let done = match ssh {
                                Some(tb) => tb.execute(exp, sc, run, opts.qlog.as_deref()),
                                None => crate::netns_exec::execute(
                                    exp,
                                    sc,
                                    run,
                                    opts.qlog.as_deref(),
                                    profiles.as_deref(),
                                    mpq,
                                ),
                            };
                            if crate::netns_exec::interrupted() {
                                // Not recorded: the run was cut short, so a resumed
                                // experiment runs it again.
                                stop.store(true, Ordering::Relaxed);
                                return;
                            }
                            done
                        } else {
                            execute(exp, sc, run, opts.qlog.as_deref())
                        };
                        if row.role == Role::Multipath {
                            fill_eben(&mut row, |id| done.get(id));
                        }
                        done.insert(run.id.clone(), row.clone());
                        if tx.send((row, manifest)).is_err() || stop.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                }
            });
        }
        drop(tx);
        for (row, manifest) in rx {
            let written = manifests_out.append(&manifest).and_then(|()| rows_out.append(&row));
            if let Err(e) = written {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
            summary.ran += 1;
            summary.failed += usize::from(failed(&row));
            summary.sim_wall_s += row.sim_wall_s;
            bar.set_message(if summary.failed > 0 { format!("{} failed", summary.failed) } else { String::new() });
            bar.inc(1);
        }
        Ok(())
    });
    bar.finish_and_clear();
    outcome?;
    if kernel && crate::netns_exec::interrupted() {
        write_csv(&opts.out)?;
        return Err(LabError::Other(format!(
            "interrupted after {} runs; the testbed was cleaned up; the same command resumes (results in {})",
            summary.ran,
            opts.out.display()
        )));
    }
    write_csv(&opts.out)?;
    Ok(summary)
}
