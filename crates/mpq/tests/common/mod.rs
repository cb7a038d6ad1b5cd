//! Helpers the `mpq lab` end-to-end tests share: the repository root and running the `mpq`
//! binary there.
#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (experiment files are named relative to it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `bin` with `args` in the repository root, stdin closed.
pub fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{bin}: {e}"))
}

/// Runs this build's `mpq` with `args` in the repository root.
pub fn mpq(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_mpq"), args)
}

/// Bytes as text, lossily.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
