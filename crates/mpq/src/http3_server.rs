//! `mpq server --http3`: a file server over HTTP/3 (RFC 9114, ALPN h3), the h3 crate on
//! mpq's application API.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use h3::server::RequestResolver;

use crate::cli::ServerArgs;

/// How much of a file one DATA frame carries.
const CHUNK: usize = 256 * 1024;

/// Runs the HTTP/3 file server until Ctrl-C or SIGTERM (`stop_signal`).
pub fn run(args: ServerArgs) -> Result<()> {
    crate::server::serve(args, mpq_h3::ALPN, serve_connection)
}

/// Answers a connection's requests, each in a task of its own, until the client closes.
async fn serve_connection(conn: mpq_api::Connection, root: Arc<PathBuf>) {
    let peer = conn.remote_address().ok();
    crate::report::follow_server_connection(&conn);
    let mut h3 = match h3::server::builder().build(mpq_h3::Connection::new(conn)).await {
        Ok(h3) => h3,
        Err(e) => {
            tracing::info!(?peer, "HTTP/3 connection failed to start: {e}");
            return;
        }
    };
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                tokio::spawn(answer(resolver, root.clone()));
            }
            Ok(None) => break,
            Err(e) => {
                // (The client's close with H3_NO_ERROR ends every connection this way.)
                if !e.is_h3_no_error() {
                    tracing::info!(?peer, "HTTP/3 connection ended: {e}");
                }
                break;
            }
        }
    }
}

/// The file a request names, if it is a GET or HEAD of a regular file under `root`.
fn requested_file(root: &Path, req: &http::Request<()>) -> Option<(std::fs::File, u64)> {
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return None;
    }
    let path = crate::server::resolve(root, req.uri().path())?;
    let file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok().filter(|m| m.is_file())?;
    Some((file, meta.len()))
}

/// Answers one request: 200 with the file, 404 when there is none, 405 for a method other
/// than GET and HEAD.
async fn answer(resolver: RequestResolver<mpq_h3::Connection, Bytes>, root: Arc<PathBuf>) {
    let (req, mut stream) = match resolver.resolve_request().await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!("bad request: {e}");
            return;
        }
    };
    let found = requested_file(&root, &req);
    let status = match (&found, req.method()) {
        (Some(_), _) => http::StatusCode::OK,
        (None, &http::Method::GET | &http::Method::HEAD) => http::StatusCode::NOT_FOUND,
        (None, _) => http::StatusCode::METHOD_NOT_ALLOWED,
    };
    let mut response = http::Response::builder().status(status);
    if let Some((_, len)) = &found {
        response = response.header(http::header::CONTENT_LENGTH, *len);
    }
    let Ok(response) = response.body(()) else { return };
    if let Err(e) = stream.send_response(response).await {
        tracing::info!(path = req.uri().path(), "response not sent: {e}");
        return;
    }
    if let (Some((mut file, _)), &http::Method::GET) = (found, req.method()) {
        loop {
            let mut chunk = vec![0u8; CHUNK];
            let n = match file.read(&mut chunk) {
                Ok(n) => n,
                Err(e) => {
                    // Mid-body: the client must not take a short body for the file.
                    tracing::warn!(path = req.uri().path(), "reading the file: {e}");
                    stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                    return;
                }
            };
            if n == 0 {
                break;
            }
            chunk.truncate(n);
            if let Err(e) = stream.send_data(Bytes::from(chunk)).await {
                tracing::info!(path = req.uri().path(), "response body not sent: {e}");
                return;
            }
        }
    }
    if let Err(e) = stream.finish().await {
        tracing::info!(path = req.uri().path(), "response not finished: {e}");
    }
}
