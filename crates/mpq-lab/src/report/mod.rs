//! `mpq lab report`: one self-contained HTML page from a results directory (or results
//! file): EBen CDFs per class and per variant (seed 002 figures 4-8), box plots of completion
//! time and goodput, completion-time ratios of TCP+TLS and MPTCP+TLS against mpq where runs
//! have both (figure 3), CPU use per core where the kernel testbeds measured it, request delay over time where runs have requests (figure 11), a summary
//! per class and variant and a per-scenario table. Figures are drawn with plotters: inline
//! SVG in the page and, on request, PNG files.
//!
//! - [`model`]: what the page shows, from rows; [`groups`]: variants and initial paths;
//!   [`repetitions`]: per-scenario medians over repetitions;
//!   [`stats`]: CDF steps, quartiles, medians.
//! - [`ratios`]: completion-time ratios of the kernel's transports against mpq's (seed 002
//!   figure 3), where the results have both.
//! - [`cores`]: CPU use per core on the kernel testbeds, where the runs measured it.
//! - [`figure`]: drawing (SVG and PNG); [`html`]: the page.

pub mod cores;
pub mod figure;
pub mod groups;
pub mod html;
pub mod model;
pub mod ratios;
pub mod repetitions;
pub mod stats;
#[cfg(test)]
mod testrows;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};
use crate::metrics::Row;
use crate::results::{read_rows, RESULTS_JSONL};

/// Name of the page written into a results directory by default.
pub const REPORT_HTML: &str = "report.html";

/// What [`write_report`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportSummary {
    /// The page.
    pub html: PathBuf,
    /// Rows read.
    pub rows: usize,
    /// Figures in the page.
    pub figures: usize,
    /// PNG files written.
    pub pngs: Vec<PathBuf>,
}

/// The results file of `input` (a results directory or a `results.jsonl` file).
pub fn results_of(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.join(RESULTS_JSONL)
    } else {
        input.to_owned()
    }
}

/// Where the page goes by default: `report.html` in the results directory.
pub fn default_html(input: &Path) -> PathBuf {
    let dir = if input.is_dir() { input } else { input.parent().unwrap_or(Path::new(".")) };
    dir.join(REPORT_HTML)
}

/// The page for `rows`, `source` naming where they came from.
pub fn render(rows: &[Row], source: &str) -> Result<String> {
    let m = model::build(rows);
    html::page(&m, source).map_err(LabError::Other)
}

/// Reads the rows of `input`, writes the page to `html` and, with `png_dir`, every figure as
/// `png_dir/ID.png`.
pub fn write_report(input: &Path, html_out: &Path, png_dir: Option<&Path>) -> Result<ReportSummary> {
    let file = results_of(input);
    if !file.exists() {
        return Err(LabError::Other(format!(
            "{}: no such results file (give a results directory, as written by mpq lab run or merge, or its results.jsonl)",
            file.display()
        )));
    }
    let rows = read_rows(&file, false)?;
    if rows.is_empty() {
        return Err(LabError::Other(format!("{}: no result rows to report", file.display())));
    }
    let m = model::build(&rows);
    let page = html::page(&m, &input.display().to_string()).map_err(LabError::Other)?;
    if let Some(parent) = html_out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(LabError::io(format!("creating {}", parent.display())))?;
    }
    std::fs::write(html_out, page).map_err(LabError::io(format!("writing {}", html_out.display())))?;
    let mut pngs = Vec::new();
    if let Some(dir) = png_dir {
        std::fs::create_dir_all(dir).map_err(LabError::io(format!("creating {}", dir.display())))?;
        for f in &m.figures {
            let p = dir.join(format!("{}.png", f.id));
            figure::to_png(f, &p).map_err(|e| LabError::Other(format!("{}: {e}", p.display())))?;
            pngs.push(p);
        }
    }
    Ok(ReportSummary { html: html_out.to_owned(), rows: rows.len(), figures: m.figures.len(), pngs })
}
