//! `mpq server`: HTTP/0.9 file server (ALPN hq-interop, the interop runner's protocol).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};

use anyhow::Result;
use mpq_proto::conn::ServerConfig;
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::{Instant, StreamId};

use crate::cli::ServerArgs;
use crate::runner::{self, App};

/// Longest request line accepted.
const MAX_REQUEST: usize = 4096;

enum Stream {
    /// Reading the request line.
    Request(Vec<u8>),
    /// Sending a file: the chunk in hand and how much of it went out.
    Sending { file: std::fs::File, chunk: Vec<u8>, pos: usize, eof: bool },
}

struct HqServer {
    root: PathBuf,
    streams: HashMap<(ConnectionHandle, StreamId), Stream>,
}

/// Maps a request path to a file under `root`, refusing anything that climbs out of it.
pub(crate) fn resolve(root: &Path, request: &str) -> Option<PathBuf> {
    let rel = Path::new(request.trim_start_matches('/'));
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(root.join(rel))
}

fn parse_request(buf: &[u8]) -> Option<String> {
    let line = std::str::from_utf8(buf).ok()?;
    let line = line.lines().next()?.trim();
    let path = line.strip_prefix("GET ")?;
    Some(path.split_whitespace().next().unwrap_or("/").to_string())
}

impl App for HqServer {
    fn poll(&mut self, _now: Instant, ep: &mut Endpoint) -> ControlFlow<()> {
        let streams = &mut self.streams;
        runner::serve_events(ep, |ev| match ev {
            runner::Served::Ended(h) => streams.retain(|(ch, _), _| *ch != h),
            runner::Served::NewStream(h, id) => {
                streams.insert((h, id), Stream::Request(Vec::new()));
            }
            // (DATAGRAM is not advertised by the file server.)
            runner::Served::Datagrams(_) => {}
        });
        let mut finished = Vec::new();
        for (&(h, id), st) in self.streams.iter_mut() {
            let Some(c) = ep.connection_mut(h) else {
                finished.push((h, id));
                continue;
            };
            if let Stream::Request(req) = st {
                let mut buf = [0u8; 1024];
                let mut fin = false;
                while let Ok(r) = c.read(id, &mut buf) {
                    req.extend_from_slice(&buf[..r.len]);
                    fin |= r.fin;
                    if r.len == 0 || r.fin || req.len() > MAX_REQUEST {
                        break;
                    }
                }
                if !(fin || req.contains(&b'\n')) && req.len() <= MAX_REQUEST {
                    continue;
                }
                let file =
                    parse_request(req).and_then(|p| resolve(&self.root, &p)).and_then(|p| std::fs::File::open(p).ok());
                match file {
                    Some(file) => *st = Stream::Sending { file, chunk: Vec::new(), pos: 0, eof: false },
                    None => {
                        // Not found (or a bad request): reset with an application error.
                        let _ = c.reset_stream(id, 0x10);
                        finished.push((h, id));
                        continue;
                    }
                }
            }
            if let Stream::Sending { file, chunk, pos, eof } = st {
                loop {
                    if *pos == chunk.len() {
                        if *eof {
                            let _ = c.finish(id);
                            finished.push((h, id));
                            break;
                        }
                        chunk.resize(256 * 1024, 0);
                        let n = file.read(chunk).unwrap_or(0);
                        chunk.truncate(n);
                        *pos = 0;
                        *eof = n == 0;
                        continue;
                    }
                    match c.write(id, &chunk[*pos..]) {
                        Ok(n) if n > 0 => *pos += n,
                        _ => break,
                    }
                }
            }
        }
        for k in finished {
            self.streams.remove(&k);
        }
        ControlFlow::Continue(())
    }
}

/// The transport settings of `mpq server`: the shared ones, and the preferred addresses.
pub(crate) fn server_transport(args: &ServerArgs) -> Result<mpq_proto::conn::TransportConfig> {
    let mut t = runner::transport_config(&args.common)?;
    if !args.preferred_address.is_empty() {
        let pa = mpq_proto::conn::PreferredAddressConfig::from_addrs(&args.preferred_address)
            .map_err(|e| anyhow::anyhow!("--preferred-address {e}"))?;
        t.preferred_address = Some(pa);
    }
    Ok(t)
}

/// The addresses `mpq server` listens on: --listen, and the preferred addresses (a client
/// that moves there must reach the server).
pub(crate) fn listen_addrs(args: &ServerArgs) -> Vec<std::net::SocketAddr> {
    let mut addrs = args.listen.clone();
    for a in &args.preferred_address {
        let covered = addrs
            .iter()
            .any(|l| l == a || (l.port() == a.port() && l.ip().is_unspecified() && l.is_ipv4() == a.is_ipv4()));
        if !covered {
            addrs.push(*a);
        }
    }
    addrs
}

/// The served directory must exist and be readable: a server that starts without it answers
/// every request with a reset, which looks like a network problem to the client.
pub(crate) fn check_root(root: &Path) -> Result<()> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => anyhow::bail!("--root {}: not a directory", root.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!(
                "--root {}: no such directory (create it, or point --root at the files to serve)",
                root.display()
            )
        }
        Err(e) => anyhow::bail!("--root {}: {e}", root.display()),
    }
    std::fs::read_dir(root)
        .map_err(|e| anyhow::anyhow!("--root {}: cannot read the directory: {e}", root.display()))?;
    Ok(())
}

/// Runs the file server until killed.
pub fn run(args: ServerArgs) -> Result<()> {
    if args.http3 {
        return crate::http3_server::run(args);
    }
    check_root(&args.root)?;
    let transport = runner::shared(server_transport(&args)?);
    let tls = crate::tls::server_config(
        &args.common,
        args.cert.as_deref(),
        args.key.as_deref(),
        &[b"hq-interop"],
        !args.no_0rtt,
    )?;
    let mut endpoints = runner::endpoints(Some(ServerConfig { tls, transport }), &args.common);
    for endpoint in &mut endpoints {
        endpoint.set_retry_mode(args.retry);
        runner::qlog_server_connections(endpoint, &args.common.qlog_dir);
    }
    let listen = listen_addrs(&args);
    let root = args.root;
    let app = || HqServer { root: root.clone(), streams: HashMap::new() };
    crate::shard_run::run_server(&listen, endpoints, app, &args.common, |addrs| {
        for addr in addrs {
            println!("listening on {addr}");
        }
        let _ = std::io::stdout().flush();
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_stay_inside_the_root() {
        let root = Path::new("/srv");
        assert_eq!(resolve(root, "/a/b.txt"), Some(PathBuf::from("/srv/a/b.txt")));
        assert_eq!(resolve(root, "/../etc/passwd"), None);
        assert_eq!(resolve(root, "/a/../../x"), None);
        assert_eq!(parse_request(b"GET /file\r\n"), Some("/file".into()));
        assert_eq!(parse_request(b"POST /file\r\n"), None);
    }
}
