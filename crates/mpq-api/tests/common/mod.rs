//! Helpers the API's integration tests share.
#![allow(dead_code)] // (each test file uses its own part)

use std::net::SocketAddr;

use mpq_api::{Connection, Wait};

/// A socket address from its text.
pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

/// Sends `data` on a new bidirectional stream of `conn` (from another thread, so that a
/// large echo cannot block on flow control) and returns what comes back.
pub fn echo(conn: &Connection, data: &[u8]) -> Vec<u8> {
    let (mut send, mut recv) = conn.open_bi().wait().expect("open_bi");
    let out = data.to_vec();
    let writer = std::thread::spawn(move || {
        send.write_all(&out).wait().expect("write");
        send.finish().expect("finish");
    });
    let back = recv.read_to_end(data.len()).wait().expect("read");
    writer.join().expect("writer");
    back
}

/// On a thread of its own: echoes every bidirectional stream the peer opens on `conn`,
/// each on a thread of its own, until the connection ends.
pub fn echo_streams(conn: Connection) {
    std::thread::spawn(move || {
        while let Ok((mut send, mut recv)) = conn.accept_bi().wait() {
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 32 * 1024];
                while let Ok(Some(n)) = recv.read(&mut buf).wait() {
                    if send.write_all(&buf[..n]).wait().is_err() {
                        return;
                    }
                }
                let _ = send.finish();
            });
        }
    });
}
