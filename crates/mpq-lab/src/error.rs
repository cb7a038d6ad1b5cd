//! Errors of the lab: a bad experiment file (with the file, line and key), I/O, and anything
//! else that stops an experiment.

use std::fmt;
use std::path::Path;

use crate::locate::locate_or_parent;

/// A problem with an experiment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The file, as given.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key path, e.g. `topology.paths[1].rate` (empty for the whole file).
    pub key: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl FileError {
    /// An error about `key` of the file whose text is `text`; the line is looked up.
    pub fn at(file: &Path, text: &str, key: &str, message: impl Into<String>) -> Self {
        FileError {
            file: file.display().to_string(),
            line: locate_or_parent(text, key),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// A YAML or schema error from the parser, which knows the line and the key path.
    pub fn from_yaml(file: &Path, e: &serde_norway::Error) -> Self {
        let line = e.location().map(|l| l.line());
        let mut message = e.to_string();
        // The parser's text is "KEY.PATH: MESSAGE at line L column C"; keep the parts apart.
        if let Some(i) = message.rfind(" at line ") {
            message.truncate(i);
        }
        let (key, message) = match message.split_once(": ") {
            Some((k, m)) if !k.contains(' ') && !k.is_empty() => (k.to_owned(), m.to_owned()),
            _ => (String::new(), message),
        };
        FileError { file: file.display().to_string(), line, key, message }
    }
}

/// Anything that stops the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A bad experiment file.
    #[error("{0}")]
    File(FileError),
    /// Reading or writing a file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// Anything else (bad option, inconsistent results directory, ...).
    #[error("{0}")]
    Other(String),
}

impl LabError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
        let context = context.into();
        move |source| LabError::Io { context, source }
    }
}

impl From<FileError> for LabError {
    fn from(e: FileError) -> Self {
        LabError::File(e)
    }
}

/// The lab's result type.
pub type Result<T, E = LabError> = std::result::Result<T, E>;
