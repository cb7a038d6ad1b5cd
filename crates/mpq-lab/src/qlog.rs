//! qlog files of lab runs (`mpq lab run --qlog DIR`): each run writes its client's and its
//! server's connection as JSON-SEQ qlog ([`mpq_sim::qlog_file::QlogFile`]) to
//! `DIR/RUN_ID_client.sqlog` and `DIR/RUN_ID_server.sqlog`; a run ID's `/` make directories,
//! so a scenario's runs sit together (`DIR/high-bdp/0003/r0/mp-minrtt-cubic-..._client.sqlog`).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use mpq_proto::qlog::QlogSink;
use mpq_sim::qlog_file::QlogFile;
use mpq_sim::scenario::QlogFactory;

/// The qlog file of run `run_id` seen from `vantage` (`client` or `server`) under `dir`.
pub fn qlog_path(dir: &Path, run_id: &str, vantage: &str) -> PathBuf {
    dir.join(format!("{run_id}_{vantage}.sqlog"))
}

/// A qlog factory for one run, and where it records the files it could not create.
pub fn factory(dir: &Path, run_id: &str) -> (QlogFactory, Rc<RefCell<Vec<String>>>) {
    let errors = Rc::new(RefCell::new(Vec::new()));
    let (dir, run_id, errs) = (dir.to_owned(), run_id.to_owned(), errors.clone());
    let f: QlogFactory = Rc::new(move |vantage: &str, odcid: &str| {
        let path = qlog_path(&dir, &run_id, vantage);
        match QlogFile::create_at(&path, odcid, vantage) {
            Ok(f) => Some(Box::new(f) as Box<dyn QlogSink>),
            Err(e) => {
                errs.borrow_mut().push(format!("qlog {}: {e}", path.display()));
                None
            }
        }
    });
    (f, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_after_the_run() {
        let p = qlog_path(Path::new("/q"), "low/0001/r2/mp-minrtt-cubic-same-path-n2-i0-s1000", "client");
        assert_eq!(p, Path::new("/q/low/0001/r2/mp-minrtt-cubic-same-path-n2-i0-s1000_client.sqlog"));
    }

    #[test]
    fn a_file_that_cannot_be_made_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the run's directory should be.
        std::fs::write(dir.path().join("c"), b"").unwrap();
        let (f, errors) = factory(dir.path(), "c/0000/r0/sp0");
        assert!(f("client", "abcd").is_none());
        assert_eq!(errors.borrow().len(), 1);
        assert!(errors.borrow()[0].contains("sp0_client.sqlog"), "{:?}", errors.borrow());
        let (f, errors) = factory(dir.path(), "ok/0000/r0/sp0");
        assert!(f("server", "abcd").is_some());
        assert!(errors.borrow().is_empty());
        assert!(dir.path().join("ok/0000/r0/sp0_server.sqlog").exists());
    }
}
