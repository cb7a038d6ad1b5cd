//! `mpq server`: HTTP/0.9 file server (ALPN hq-interop, the interop runner's protocol) on
//! mpq's application API: a task per connection, a task per request.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use mpq_proto::conn::ServerConfig;

use crate::cli::ServerArgs;

/// Longest request line accepted.
const MAX_REQUEST: usize = 4096;

/// How much of a file one write hands to the stream.
const CHUNK: usize = 256 * 1024;

/// The application error code of a stream reset for a request that names no file (or is
/// not a GET).
const NOT_FOUND: u64 = 0x10;

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

/// Serves one connection: logs its handshake, answers every request stream in a task of its
/// own, and prints the `connection ended` line (its figures) when it closes.
async fn serve_connection(conn: mpq_api::Connection, root: Arc<PathBuf>) {
    crate::report::follow_server_connection(&conn);
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(answer(send, recv, root.clone()));
    }
}

/// Reads the request line (up to its newline or the stream's end, at most [`MAX_REQUEST`]
/// bytes) and sends the file it names, or resets the stream.
async fn answer(mut send: mpq_api::SendStream, mut recv: mpq_api::RecvStream, root: Arc<PathBuf>) {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.contains(&b'\n') && request.len() <= MAX_REQUEST {
        match recv.read(&mut buf).await {
            Ok(Some(n)) => request.extend_from_slice(&buf[..n]),
            Ok(None) => break,
            Err(_) => return,
        }
    }
    let file = parse_request(&request).and_then(|p| resolve(&root, &p)).and_then(|p| std::fs::File::open(p).ok());
    let Some(mut file) = file else {
        // Not found (or a bad request): reset with an application error.
        let _ = send.reset(NOT_FOUND);
        return;
    };
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) => {
                // Mid-body: the client must not take a short body for the file.
                tracing::warn!("reading the file: {e}");
                let _ = send.reset(NOT_FOUND);
                return;
            }
        };
        if n == 0 {
            break;
        }
        if send.write_all(&chunk[..n]).await.is_err() {
            return;
        }
    }
    let _ = send.finish();
}

/// The transport settings of `mpq server`: the shared ones, and the preferred addresses.
pub(crate) fn server_transport(args: &ServerArgs) -> Result<mpq_proto::conn::TransportConfig> {
    let mut t = crate::runner::transport_config(&args.common)?;
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

/// Runs the file server until Ctrl-C or SIGTERM (which close its connections first:
/// `stop_signal`).
pub fn run(args: ServerArgs) -> Result<()> {
    if args.http3 {
        return crate::http3_server::run(args);
    }
    serve(args, b"hq-interop", serve_connection)
}

/// A file server of `alpn` on the application API until a stop signal (`stop_signal`): the endpoint the options
/// ask for, and `answer` in a task for every connection it accepts, with the served root.
pub(crate) fn serve<F, Fut>(args: ServerArgs, alpn: &[u8], answer: F) -> Result<()>
where
    F: Fn(mpq_api::Connection, Arc<PathBuf>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    check_root(&args.root)?;
    let transport = crate::runner::shared(server_transport(&args)?);
    let tls =
        crate::tls::server_config(&args.common, args.cert.as_deref(), args.key.as_deref(), &[alpn], !args.no_0rtt)?;
    let executor = crate::api_runtime::executor()?;
    let ep = crate::api_runtime::endpoint(&listen_addrs(&args), Some(ServerConfig { tls, transport }), &args.common)?;
    ep.set_retry_mode(args.retry)?;
    // (Caught before the server says it listens: a script may signal it as soon as it does.)
    let mut signals = crate::api_runtime::stop_signals()?;
    for addr in ep.local_addrs() {
        println!("listening on {addr}");
    }
    let _ = std::io::stdout().flush();
    let root = Arc::new(args.root);
    let code = crate::stop_signal::close_code(alpn == mpq_h3::ALPN);
    executor.block_on(signals.serve(&ep, code, |conn| {
        tokio::spawn(answer(conn, root.clone()));
    }));
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
