//! Command output on standard output.

use anyhow::Result;

/// Writes `text` to stdout; a reader that went away (`mpq ... | head`) ends the output
/// quietly, as it does a Unix filter, instead of the panic `println!` gives.
pub(crate) fn print_all(text: &str) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
