//! `Connecting::into_0rtt` after the runtime has already completed the handshake: the
//! connection is handed out all the same (CI once found it refused when the test thread was
//! descheduled between `connect` and `into_0rtt`).

use crate::{Endpoint, Options, Threads, TransportConfig, Wait, ZeroRttState};

fn settled_before_into_0rtt(threads: Threads) {
    let (client_cfg, server_cfg) = mpq_proto::testing::zero_rtt_configs(TransportConfig::default());
    let options = Options { threads, ..Options::default() };
    let server = Endpoint::server(&["127.0.0.1:0".parse().unwrap()], server_cfg, options.clone()).expect("server");
    let server_addr = server.local_addrs()[0];
    let accepting = server.clone();
    let serving = std::thread::spawn(move || {
        while let Some(conn) = accepting.accept().wait() {
            // Answers every stream with an empty one.
            std::thread::spawn(move || {
                while let Ok((mut send, _recv)) = conn.accept_bi().wait() {
                    let _ = send.finish();
                }
            });
        }
    });
    let ep = Endpoint::client(&["127.0.0.1:0".parse().unwrap()], options).expect("client");
    let first = ep.connect(server_addr, "localhost", &client_cfg).expect("connect").wait().expect("handshake");
    // The ticket comes after the handshake: a stream's round trip waits for it.
    let (mut send, mut recv) = first.open_bi().wait().expect("open");
    send.finish().expect("finish");
    drop(recv.read_to_end(0).wait());
    first.close(0, b"done");
    let connecting = ep.connect(server_addr, "localhost", &client_cfg).expect("connect");
    // Wait on the same connection's handshake through a second handle: no race, it is over.
    let inner = connecting.conn.clone().expect("a connection").established().wait().expect("handshake");
    assert!(inner.handshake_info().expect("info").is_some_and(|i| i.resumed), "{threads:?}: not resumed");
    let Ok(conn) = connecting.into_0rtt() else { panic!("{threads:?}: refused after the handshake completed") };
    assert_eq!(conn.zero_rtt().expect("state"), ZeroRttState::Accepted, "{threads:?}");
    // Without a ticket for another name, no 0-RTT: the future comes back.
    let fresh = ep.connect(server_addr, "127.0.0.1", &client_cfg).expect("connect");
    let fresh = fresh.into_0rtt().expect_err("no 0-RTT without a ticket");
    drop((fresh, conn, inner, first));
    server.close(0, b"");
    ep.close(0, b"");
    drop(serving);
}

#[test]
fn into_0rtt_hands_out_a_connection_whose_handshake_already_completed() {
    settled_before_into_0rtt(Threads::Single);
    settled_before_into_0rtt(Threads::PerPath);
    settled_before_into_0rtt(Threads::Shards(2));
}
