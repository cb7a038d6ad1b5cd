//! Scratch directories for the binary's tests, removed when dropped (also when a test panics),
//! so that repeated CI runs do not fill the machine's temporary directory.

use std::ops::Deref;
use std::path::Path;

/// A temporary directory named after its test; derefs to its path, removed on drop.
pub struct Scratch(tempfile::TempDir);

/// A new empty scratch directory whose name starts with `mpq-{suite}-{name}-`.
pub fn scratch(suite: &str, name: &str) -> Scratch {
    let dir = tempfile::Builder::new().prefix(&format!("mpq-{suite}-{name}-")).tempdir().expect("scratch dir");
    Scratch(dir)
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}
