//! A runtime that fails (a thread panics) wakes every waiting future of the API with
//! [`Error::RuntimeFailed`] instead of leaving it waiting for ever.

use std::sync::mpsc;
use std::time::Duration;

use crate::{Endpoint, Error, Options, Threads, TransportConfig, Wait};

/// A handshake with a peer that never answers waits; the runtime then panics; the waiting
/// thread must wake with the failure, and later calls must fail the same way.
fn waiter_wakes(threads: Threads) {
    let (cc, _) = mpq_proto::testing::configs(TransportConfig::default());
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("a silent peer");
    let ep = Endpoint::client(&["127.0.0.1:0".parse().unwrap()], Options { threads, ..Options::default() })
        .expect("client endpoint");
    let connecting = ep.connect(silent.local_addr().unwrap(), "localhost", &cc).expect("connect");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(connecting.wait().err());
    });
    let accept = ep.clone();
    let (atx, arx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = atx.send(accept.accept().wait().is_none());
    });
    ep.inner.lock().expect("running").boom = true;
    let woke = rx.recv_timeout(Duration::from_secs(20)).expect("the handshake's waiter woke");
    assert!(matches!(woke, Some(Error::RuntimeFailed)), "{threads:?}: {woke:?}");
    assert!(arx.recv_timeout(Duration::from_secs(20)).expect("the accepting thread woke"));
    let again = ep.connect(silent.local_addr().unwrap(), "localhost", &cc).err();
    assert!(matches!(again, Some(Error::RuntimeFailed)), "{threads:?}: {again:?}");
}

#[test]
fn waiters_wake_when_the_runtime_fails_in_either_runtime() {
    waiter_wakes(Threads::Single);
    waiter_wakes(Threads::PerPath);
}
