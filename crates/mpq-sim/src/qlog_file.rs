//! qlog files: JSON-SEQ (RFC 7464), qlog version 0.3 (draft-ietf-quic-qlog-main-schema-01),
//! one per connection; qvis and the `qlog` crate up to 0.16 read them.
//! Used by the simulator's runs (`mpq sim --qlog-dir`, `mpq lab run --qlog`) and by mpq's
//! real endpoints alike.

use std::io::{BufWriter, Write};
use std::path::Path;

use mpq_proto::qlog::QlogSink;
use mpq_proto::Instant;
use serde_json::json;

/// Writes qlog events of one connection to `<dir>/<odcid>_<vantage>.sqlog`.
pub struct QlogFile {
    out: BufWriter<std::fs::File>,
}

impl QlogFile {
    /// Creates `<dir>/<odcid>_<vantage>.sqlog` and writes the header record.
    pub fn create(dir: &Path, odcid: &str, vantage: &str) -> std::io::Result<Self> {
        Self::create_at(&dir.join(format!("{odcid}_{vantage}.sqlog")), odcid, vantage)
    }

    /// Creates the file `path` (and its directory) for the connection `odcid` seen from
    /// `vantage` (`client` or `server`), and writes the header record.
    pub fn create_at(path: &Path, odcid: &str, vantage: &str) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let f = std::fs::File::create(path)?;
        let mut out = BufWriter::new(f);
        // qlog 0.3's JSON-SEQ header (see mpq_proto::qlog for why 0.3): qvis needs
        // `qlog_version`, `qlog_format` and `trace`; times are milliseconds relative to the
        // connection's clock.
        let header = json!({
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "title": format!("mpq {vantage}"),
            "trace": {
                "vantage_point": {"type": vantage},
                "common_fields": {"ODCID": odcid, "group_id": odcid, "time_format": "relative", "reference_time": 0.0},
            },
        });
        out.write_all(b"\x1e")?;
        serde_json::to_writer(&mut out, &header)?;
        out.write_all(b"\n")?;
        Ok(Self { out })
    }
}

impl QlogSink for QlogFile {
    fn emit(&mut self, time: Instant, name: &'static str, data: serde_json::Value) {
        let ev = json!({"time": time.as_nanos() as f64 / 1e6, "name": name, "data": data});
        let _ = self.out.write_all(b"\x1e");
        let _ = serde_json::to_writer(&mut self.out, &ev);
        let _ = self.out.write_all(b"\n");
        // Connectivity events (state, paths, close) are rare: flush at each, so that the file
        // is readable up to the last one while the process is still running, e.g. on a
        // server whose connections end long before it does.
        if name.starts_with("connectivity:") {
            let _ = self.out.flush();
        }
    }
}

impl Drop for QlogFile {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}
