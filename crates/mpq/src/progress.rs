//! Progress bars and summary lines.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A byte-count progress bar, hidden when stderr is not a terminal.
pub fn bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new_spinner();
    b.set_style(
        ProgressStyle::with_template("{spinner} {bytes} received ({binary_bytes_per_sec}) {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    b.enable_steady_tick(Duration::from_millis(200));
    b
}

/// Human-readable summary of a transfer.
pub fn summary(bytes: u64, elapsed: Duration, files: usize) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    format!("{files} file(s), {bytes} bytes in {secs:.3} s: {:.1} Mbit/s", bytes as f64 * 8.0 / secs / 1e6)
}

/// Wall-clock stopwatch for reports (the protocol never sees it).
pub struct Stopwatch(std::time::Instant);

impl Stopwatch {
    /// Starts now.
    #[allow(clippy::disallowed_methods)] // reporting only
    pub fn start() -> Self {
        Self(std::time::Instant::now())
    }

    /// Time since start.
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}
