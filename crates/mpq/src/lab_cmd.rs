//! `mpq lab`: experiments from YAML files, run in the simulator (see mpq-lab and
//! docs/lab-experiment-files.md), and the kernel testbed (`mpq lab testbed`, docs/lab-testbed.md).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use mpq_lab::plan::Plan;
use mpq_lab::results::{merge, RESULTS_CSV, RESULTS_JSONL};
use mpq_lab::runner::{default_out, run, RunOptions};
use mpq_lab::shard::Shard;
use mpq_lab::Experiment;

use crate::stdout::print_all;

/// `mpq lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Expand an experiment file into its scenarios and runs (with their seeds) without
    /// running anything; checks the file.
    #[command(after_help = "Examples:\n  mpq lab plan experiments/seed002-4.1.yaml --limit 3\n  \
mpq lab plan experiments/seed002-low-bdp-smoke.yaml --json")]
    Plan(PlanArgs),
    /// Run an experiment in the simulator: in parallel, with a progress bar, one row per run
    /// in DIR/results.jsonl and DIR/results.csv and one manifest per run in
    /// DIR/manifests.jsonl. Runs whose rows exist are skipped, so an interrupted experiment
    /// resumes where it stopped.
    #[command(after_help = "Examples:\n  mpq lab run experiments/seed002-low-bdp-smoke.yaml --limit 2\n  \
mpq lab run experiments/seed002-4.1.yaml --jobs 2 --out /tmp/e1\n  \
mpq lab run experiments/seed002-4.1.yaml --limit 1 --jobs 1 --qlog /tmp/e1-qlog\n  \
mpq lab run experiments/seed002-4.1.yaml --shard 3/8   # one machine's slice; then mpq lab merge")]
    Run(RunArgs),
    /// Join results (directories or results.jsonl files, e.g. one per shard) into one
    /// directory: rows deduplicated by run ID, EBen recomputed, JSON lines and CSV written.
    #[command(after_help = "Example:\n  mpq lab merge lab-results/all lab-results/seed002-4.1/shard-*")]
    Merge(MergeArgs),
    /// Render a results directory (or results.jsonl file) as one self-contained HTML page:
    /// EBen CDFs per class and variant, box plots of completion time and goodput, the
    /// completion-time ratios of TCP+TLS and MPTCP+TLS against mpq (seed 002 figure 3),
    /// request delay over time, a summary per class and variant and a per-scenario table.
    #[command(after_help = "Examples:\n  mpq lab report lab-results/seed002-4.1\n  \
mpq lab report /tmp/e1 --out /tmp/e1.html --png /tmp/e1-png")]
    Report(ReportArgs),
    /// Submit an experiment to a cluster: with --slurm, a job array (one shard of the plan
    /// per task, `mpq lab run FILE --shard K/N --out DIR/shard-K`) and a job that runs after
    /// all of them succeeded and merges them into DIR/merged (with its report). The compute
    /// nodes must see the mpq binary, FILE and DIR at the same paths.
    #[command(
        after_help = "Examples:\n  mpq lab submit experiments/seed002-4.1.yaml --slurm --shards 16 --out /shared/e1\n  \
mpq lab submit experiments/seed002-low-bdp-smoke.yaml --slurm --shards 2 --dry-run"
    )]
    Submit(SubmitArgs),
    /// The kernel testbed: client, server and router network namespaces joined by paths
    /// through a user-space link emulator that runs the simulator's link model in real time
    /// (docs/lab-testbed.md). Needs root.
    #[command(subcommand)]
    Testbed(crate::testbed_cmd::TestbedCommand),
}

/// Which scenarios of a plan.
#[derive(Debug, Args)]
pub struct Selection {
    /// Only the first N scenarios of the plan (with all their runs and baselines).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only slice I of N (1-based): scenario k belongs to slice k mod N + 1.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
}

/// `mpq lab plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The experiment file (YAML).
    pub file: PathBuf,
    /// Which scenarios.
    #[command(flatten)]
    pub select: Selection,
    /// Print the selected scenarios as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `mpq lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The experiment file (YAML).
    pub file: PathBuf,
    /// Which scenarios.
    #[command(flatten)]
    pub select: Selection,
    /// Results directory (default: lab-results/NAME, or lab-results/NAME/shard-I-of-N).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Simulations at once (default: the number of cores).
    #[arg(long, value_name = "J")]
    pub jobs: Option<usize>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Write every run's client and server qlog (JSON-SEQ) into DIR, named after the run ID:
    /// DIR/CLASS/POINT/rREP/RUN_client.sqlog and ..._server.sqlog.
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,
    /// Kernel testbed (root, perf installed): record both endpoints of every run with `perf
    /// record -e cpu-clock -g` (OUT/profiles/RUN_ID/{server,client}.perf.data) and add their
    /// CPU profiles by category (packet I/O, crypto, connection management, locking,
    /// application, ACK handling, other; crates/mpq-lab/data/perf-categories.tsv) to the
    /// rows as profile_server and profile_client.
    #[arg(long)]
    pub profile: bool,
    /// The hosts file of an SSH testbed (`testbed: ssh`): the server's and the client's host
    /// (hostname for SSH, optional user, port, identity, ssh_options, workdir), their
    /// addresses (one per path) and the interfaces holding them, as JSON or YAML (seed 000
    /// listing 4.1). The lab copies this mpq binary to both and runs `mpq perf` there.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
}

/// `mpq lab merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Directory to write the joined results to.
    pub out: PathBuf,
    /// Results directories or results.jsonl files.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

/// `mpq lab report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results directory (as written by `mpq lab run` or `merge`) or a results.jsonl file.
    pub results: PathBuf,
    /// The page to write (default: report.html in the results directory).
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
    /// Also write every figure as a PNG file into DIR.
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
}

/// `mpq lab submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The experiment file (YAML).
    pub file: PathBuf,
    /// Submit to Slurm (sbatch); the only scheduler so far.
    #[arg(long, required = true)]
    pub slurm: bool,
    /// Array tasks: the plan is cut into this many shards.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub shards: usize,
    /// Results directory (default: lab-results/NAME); made absolute.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Slurm partition (default: the cluster's default partition).
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// CPUs per array task (simulations at once in each shard).
    #[arg(long, value_name = "C", default_value_t = 1)]
    pub cpus_per_task: usize,
    /// The mpq binary the jobs run (default: this one).
    #[arg(long, value_name = "PATH")]
    pub mpq: Option<PathBuf>,
    /// The sbatch command.
    #[arg(long, value_name = "PATH", default_value = "sbatch")]
    pub sbatch: PathBuf,
    /// Print the two scripts instead of submitting them.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `mpq lab ...`.
pub fn run_lab(cmd: LabCommand) -> Result<()> {
    match cmd {
        LabCommand::Plan(a) => plan(a),
        LabCommand::Run(a) => run_cmd(a),
        LabCommand::Merge(a) => merge_cmd(a),
        LabCommand::Report(a) => report_cmd(a),
        LabCommand::Submit(a) => submit_cmd(a),
        LabCommand::Testbed(c) => crate::testbed_cmd::run(c),
    }
}

fn load(file: &Path) -> Result<(Experiment, Plan)> {
    let exp = Experiment::load(file)?;
    let plan = Plan::new(&exp).map_err(anyhow::Error::msg)?;
    Ok((exp, plan))
}

fn plan(a: PlanArgs) -> Result<()> {
    use std::fmt::Write;
    let (exp, plan) = load(&a.file)?;
    let sel = plan.select(a.select.limit, a.select.shard);
    if a.json {
        let scenarios: Vec<_> = sel.iter().map(|&k| &plan.scenarios[k]).collect();
        let v = serde_json::json!({ "experiment": plan.experiment, "scenarios": scenarios });
        return print_all(&(serde_json::to_string_pretty(&v)? + "\n"));
    }
    let runs: usize = sel.iter().map(|&k| plan.scenarios[k].runs.len()).sum();
    let mut o = String::new();
    writeln!(
        o,
        "{}: {} of {} scenarios, {} runs ({} classes, {} repetition(s))",
        exp.name,
        sel.len(),
        plan.scenarios.len(),
        runs,
        exp.classes.len(),
        exp.repetitions
    )?;
    for &k in &sel {
        let s = &plan.scenarios[k];
        writeln!(o, "#{k} {} seed {}", s.id, s.seed)?;
        for (i, l) in s.links.iter().enumerate() {
            writeln!(o, "    path {i}: {l}")?;
        }
        if let Some(b) = &s.bottleneck {
            let with = if s.competitor { ", with a competing flow" } else { "" };
            writeln!(o, "    shared bottleneck: {b}{with}")?;
        }
        for &(i, t) in &s.fail {
            writeln!(o, "    path {i} fails at {t} s")?;
        }
        for r in &s.runs {
            writeln!(o, "    run {}", r.id.rsplit('/').next().unwrap_or(&r.id))?;
        }
    }
    print_all(&o)
}

fn run_cmd(a: RunArgs) -> Result<()> {
    let (exp, plan) = load(&a.file)?;
    if a.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let out = a.out.unwrap_or_else(|| default_out(&exp, a.select.shard));
    let opts = RunOptions {
        limit: a.select.limit,
        shard: a.select.shard,
        out: out.clone(),
        jobs,
        progress: !a.quiet,
        qlog: a.qlog,
        profile: a.profile,
        mpq: None,
        hosts: a.hosts,
    };
    #[allow(clippy::disallowed_methods)] // wall time of the whole experiment, for the summary
    let start = std::time::Instant::now();
    let s = run(&exp, &plan, &opts)?;
    println!(
        "{}: {} scenarios, {} runs: {} ran ({} failed), {} already done; {:.1} s wall, {:.1} s in simulations",
        exp.name,
        s.scenarios,
        s.runs,
        s.ran,
        s.failed,
        s.skipped,
        start.elapsed().as_secs_f64(),
        s.sim_wall_s
    );
    println!("results: {} and {}", out.join(RESULTS_JSONL).display(), out.join(RESULTS_CSV).display());
    Ok(())
}

fn merge_cmd(a: MergeArgs) -> Result<()> {
    let s = merge(&a.out, &a.inputs)?;
    println!("{} rows ({} duplicates dropped) into {}", s.rows, s.duplicates, a.out.display());
    if !s.conflicts.is_empty() {
        eprintln!(
            "warning: {} run IDs had different results in different inputs (the first kept): {}",
            s.conflicts.len(),
            s.conflicts.join(", ")
        );
    }
    Ok(())
}

fn report_cmd(a: ReportArgs) -> Result<()> {
    let out = a.out.unwrap_or_else(|| mpq_lab::report::default_html(&a.results));
    let s = mpq_lab::report::write_report(&a.results, &out, a.png.as_deref())?;
    println!("{}: {} rows, {} figures", s.html.display(), s.rows, s.figures);
    if let Some(dir) = &a.png {
        println!("{} PNG files in {}", s.pngs.len(), dir.display());
    }
    Ok(())
}

fn submit_cmd(a: SubmitArgs) -> Result<()> {
    let (exp, plan) = load(&a.file)?;
    let abs = |p: &Path| std::path::absolute(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()));
    let mpq = match &a.mpq {
        Some(p) => abs(p)?,
        None => std::env::current_exe()?,
    };
    let out = abs(&a.out.clone().unwrap_or_else(|| default_out(&exp, None)))?;
    let job = mpq_lab::slurm::SlurmJob {
        mpq,
        file: abs(&a.file)?,
        out,
        shards: a.shards,
        partition: a.partition,
        cpus_per_task: a.cpus_per_task,
        name: format!("mpq-lab-{}", exp.name),
    };
    job.check()?;
    if a.shards > plan.scenarios.len() {
        eprintln!(
            "warning: {} shards for {} scenarios: {} array tasks will have nothing to run",
            a.shards,
            plan.scenarios.len(),
            a.shards - plan.scenarios.len()
        );
    }
    if a.dry_run {
        return print_all(&format!(
            "# {}\n{}\n# {} (submitted with --dependency=afterok:<array job>)\n{}",
            job.script_dir().join("array.sbatch").display(),
            job.array_script(),
            job.script_dir().join("merge.sbatch").display(),
            job.merge_script()
        ));
    }
    let s = job.submit(&a.sbatch)?;
    println!(
        "submitted job array {} ({} shards of {} scenarios) and merge job {}; merged results and report in {}",
        s.array,
        a.shards,
        plan.scenarios.len(),
        s.merge,
        job.out.join("merged").display()
    );
    Ok(())
}
