//! `mpq client` over HTTP/0.9 (ALPN hq-interop): the URLs, the files the bodies go to, and
//! the requests, one stream per URL (the connections: `api_client`).

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::ProgressBar;

/// A parsed `https://host:port/path` URL.
#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    /// Host name or IP literal (without brackets).
    pub host: String,
    /// Port (443 when absent).
    pub port: u16,
    /// Path with its leading slash.
    pub path: String,
}

/// Parses the URLs the interop runner uses.
pub fn parse_url(s: &str) -> Result<Url> {
    let rest = s.strip_prefix("https://").ok_or_else(|| anyhow!("{s}: only https:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6.find(']').ok_or_else(|| anyhow!("{s}: unterminated IPv6 literal"))?;
        let port = v6[end + 1..].strip_prefix(':').map(str::parse).transpose()?.unwrap_or(443);
        (v6[..end].to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().with_context(|| format!("{s}: bad port"))?),
            None => (authority.to_string(), 443),
        }
    };
    if host.is_empty() {
        bail!("{s}: missing host");
    }
    Ok(Url { host, port, path: path.to_string() })
}

/// The server every URL names (the first URL's host, resolved); an error if the URLs name
/// more than one (one connection fetches them all).
pub fn server_of(urls: &[Url]) -> Result<(Url, SocketAddr)> {
    let first = urls.first().ok_or_else(|| anyhow!("no URL given (e.g. https://127.0.0.1:4433/file)"))?.clone();
    if urls.iter().any(|u| u.host != first.host || u.port != first.port) {
        bail!("all URLs must name the same server");
    }
    let server = (first.host.as_str(), first.port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {}", first.host))?
        .next()
        .ok_or_else(|| anyhow!("{} has no address", first.host))?;
    Ok((first, server))
}

/// Creates the file under `output` (made if missing) that `url`'s body goes to: named after
/// the URL's last path segment, `index.html` for a directory.
pub fn output_file(output: &std::path::Path, url: &Url) -> Result<std::fs::File> {
    std::fs::create_dir_all(output)
        .with_context(|| format!("--output {}: cannot create the directory", output.display()))?;
    let name = url.path.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or("index.html");
    let path = output.join(name);
    std::fs::File::create(&path).with_context(|| format!("cannot write {} (check --output)", path.display()))
}

/// One URL to fetch and the file its body goes to.
pub struct Download {
    /// The URL.
    pub url: Url,
    /// Where its body goes.
    pub file: std::fs::File,
}

/// Bytes gathered before a write to the file: a chunk of the stream is a packet's payload,
/// and a write call per packet made writing the file the client's bottleneck (a 300 MB
/// download spent more time in write(2) than in the protocol).
const FILE_BUFFER: usize = 1024 * 1024;

/// A download's file, through a buffer of [`FILE_BUFFER`] bytes (flush it at the end).
pub fn buffered(file: &mut std::fs::File) -> std::io::BufWriter<&mut std::fs::File> {
    std::io::BufWriter::with_capacity(FILE_BUFFER, file)
}

/// How much of a body one read takes.
const READ_CHUNK: usize = 256 * 1024;

/// HTTP/0.9 on `conn`: every request at once, each on its own bidirectional stream
/// (`GET /path` and the stream's end), each body written to its file as it comes; then the
/// connection is closed (code 0) after its statistics were taken. The requests are written
/// here, one after the other, before any body is read: on a connection taken in 0-RTT they
/// must leave before the handshake completes, which on loopback takes about a millisecond
/// (a task per request, scheduled later, often missed it).
pub async fn hq_requests(
    conn: &mpq_api::Connection,
    downloads: Vec<Download>,
    bar: &ProgressBar,
) -> Result<crate::api_client::Fetched> {
    let clock = crate::progress::Stopwatch::start();
    let mut tasks = Vec::new();
    let mut failure = None;
    for d in downloads {
        let path = d.url.path.clone();
        match send_request(conn, &path).await {
            Ok(recv) => {
                let bar = bar.clone();
                tasks.push(tokio::spawn(async move { receive_body(recv, d, &bar).await }));
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let fetched = crate::api_client::Fetched::collect(conn, &clock, tasks, failure).await?;
    conn.close(0, b"");
    Ok(fetched)
}

/// Opens a stream and sends `GET path` on it, with the stream's end; the stream the
/// answer comes on. Waits only while the server's stream limit is reached.
async fn send_request(conn: &mpq_api::Connection, path: &str) -> Result<mpq_api::RecvStream> {
    let (mut send, recv) = conn.open_bi().await.map_err(|e| anyhow!("GET {path}: {e}"))?;
    send.write_all(format!("GET {path}\r\n").as_bytes()).await.map_err(|e| anyhow!("GET {path}: {e}"))?;
    send.finish().map_err(|e| anyhow!("GET {path}: {e}"))?;
    Ok(recv)
}

/// Writes the body of `d`'s answer to its file; its length. A stream the server reset (no
/// such file) fails.
async fn receive_body(mut recv: mpq_api::RecvStream, mut d: Download, bar: &ProgressBar) -> Result<u64> {
    let path = &d.url.path;
    let mut received = 0u64;
    let mut file = buffered(&mut d.file);
    while let Some(chunk) = recv.read_chunk(READ_CHUNK).await.map_err(|e| anyhow!("{path}: {e}"))? {
        file.write_all(&chunk).with_context(|| format!("writing {path}"))?;
        received += chunk.len() as u64;
        bar.inc(chunk.len() as u64);
    }
    file.flush().with_context(|| format!("writing {path}"))?;
    Ok(received)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("https://127.0.0.1:4433/a/b").unwrap(),
            Url { host: "127.0.0.1".into(), port: 4433, path: "/a/b".into() }
        );
        assert_eq!(parse_url("https://[::1]:9/x").unwrap(), Url { host: "::1".into(), port: 9, path: "/x".into() });
        assert_eq!(parse_url("https://example.org").unwrap().port, 443);
        assert!(parse_url("http://x/").is_err());
        assert!(parse_url("https://:4/").is_err());
    }
}
