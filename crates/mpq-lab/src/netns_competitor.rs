//! The competing single-path download of a shared bottleneck on the kernel testbed
//! (`competitor: true`), as the simulator's competitor: `mpq perf` over QUIC with CUBIC
//! between the competitor path's addresses, and its rate over a run from the emulator's
//! counters.

use std::path::Path;
use std::process::Stdio;

use crate::netns_process::{server_port, Reaped};
use crate::testbed::control;
use crate::testbed::state::{PathRecord, State};

/// The competing single-path download through a shared bottleneck (the simulator's
/// competitor): `mpq perf` over QUIC with CUBIC between the competitor path's addresses,
/// running until dropped.
pub(crate) struct Competitor {
    _server: Reaped,
    _client: Reaped,
}

/// The competitor's download never ends on its own within a run.
const COMPETITOR_DURATION_S: &str = "86400";

impl Competitor {
    /// Starts its server and its client on the competitor's path of testbed `state`.
    pub(crate) fn start(state: &State, path: &PathRecord, mpq: &Path) -> Result<Self, String> {
        let cc = ["--cc".to_owned(), "cubic".to_owned()];
        let mut server_args: Vec<String> =
            vec!["perf".into(), "server".into(), "--listen".into(), format!("{}:0", path.server)];
        server_args.extend(cc.iter().cloned());
        let mut server = Reaped::spawn(&state.server_ns, mpq, &server_args, Stdio::piped(), "the competitor's server")?;
        let port = server_port(&mut server.child).map_err(|e| format!("the competitor's server: {e}"))?;
        let mut client_args: Vec<String> = vec![
            "perf".into(),
            "client".into(),
            "--connect".into(),
            format!("{}:{port}", path.server),
            "--local".into(),
            format!("{}:0", path.client),
            "--no-multipath".into(),
            "--duration".into(),
            COMPETITOR_DURATION_S.into(),
        ];
        client_args.extend(cc);
        let client = Reaped::spawn(&state.client_ns, mpq, &client_args, Stdio::null(), "the competitor's client")?;
        Ok(Competitor { _server: server, _client: client })
    }
}

/// The competitor's rate over the run, bit/s: the bytes (IP packets) its path delivered to
/// its client between the two emulator reports, over the `elapsed` seconds between them.
pub(crate) fn competitor_rate(
    before: Option<&control::Report>,
    after: Option<&control::Report>,
    elapsed: f64,
) -> Option<f64> {
    let bytes = |r: Option<&control::Report>| r.and_then(|r| r.competitor.as_ref()).map(|c| c.s2c.delivered_bytes);
    let (b, a) = (bytes(before)?, bytes(after)?);
    (elapsed > 0.0).then(|| a.saturating_sub(b) as f64 * 8.0 / elapsed)
}
