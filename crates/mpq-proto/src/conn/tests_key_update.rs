//! Key updates (RFC 9001 §6) against a peer that has not seen ours yet.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use super::tests::{confirm_handshake, Upload};
use super::tests_multipath::{local_updates_apart, slow_upload_windows, SharedLog};
use super::*;
use crate::testing::Pair;

/// The server (the receiver of an upload, sending only ACKs) updates its keys, and nothing it
/// sends arrives for over three PTOs: the client never learns of the update and goes on in
/// the old phase. RFC 9001 §6.1: "An endpoint MUST retain old keys until it has
/// successfully unprotected a packet sent using the new keys". The server dropped the old
/// key three PTOs after its update whatever it had heard, then could open nothing the client
/// sent, and the connection hung until its idle timeout (seen against ngtcp2's server
/// dropping 5 % of the packets).
#[test]
fn old_keys_stay_until_the_peer_is_heard_in_the_new_phase() {
    let mut pair = Pair::new(TransportConfig::default());
    assert!(confirm_handshake(&mut pair));
    let mut up = Upload::new(4_000_000);
    // Part of the upload in the handshake's phase.
    pair.run_until(Duration::from_millis(60), |p| {
        up.pump(p);
        false
    });
    assert!(!up.is_done(), "the upload ended before the key update");
    let h = pair.server.handles()[0];
    let now = pair.now;
    let server = pair.server.connection_mut(h).expect("server");
    let epoch = server.shared.one_rtt.as_ref().map(|k| k.epoch());
    assert!(server.initiate_key_update(now), "the server may update");
    let pto = server.max_pto();
    let blackout = Rc::new(Cell::new(true));
    let dark = blackout.clone();
    pair.drop = Box::new(move |_, to_server| !to_server && dark.get());
    let until = pair.now + 6 * pto;
    pair.run_until(Duration::from_secs(10), |p| {
        up.pump(p);
        p.now >= until
    });
    let server = pair.server.connection_mut(h).expect("server");
    assert!(server.shared.one_rtt.as_ref().is_some_and(|k| k.has_previous()), "the old key is still held");
    blackout.set(false);
    let done = pair.run_until(Duration::from_secs(20), |p| {
        up.pump(p);
        up.is_done()
    });
    assert!(done, "the upload stalled after the blackout");
    up.assert_intact();
    // The client followed the update once it heard the server again.
    let c = super::tests::client(&mut pair);
    assert!(c.shared.one_rtt.as_ref().map(|k| k.epoch()) > epoch, "the client did not follow the update");
    // And the server dropped the old key three PTOs after that (its timer had fired).
    let end = pair.now + 6 * pto;
    pair.run_until(Duration::from_secs(5), |p| p.now >= end);
    let server = pair.server.connection_mut(h).expect("server");
    assert!(server.shared.one_rtt.as_ref().is_some_and(|k| !k.has_previous()), "the old key was never dropped");
}

/// RFC 9001 §6.5: "Endpoints SHOULD wait three times the PTO before initiating a key update
/// after receiving an acknowledgment that confirms that the previous key update was
/// received. Failing to allow sufficient time could lead to packets being discarded."
/// Single-path connections did not wait (only multipath ones did, RFC 10069 §2.5), and
/// ngtcp2's server could not open the packets of an update that followed the previous one
/// by 7 ms.
#[test]
fn single_path_key_updates_wait_three_ptos() {
    let cfg =
        TransportConfig { key_update_interval: 100, streams: slow_upload_windows(), ..TransportConfig::default() };
    let mut pair = Pair::new(cfg);
    let logs = [std::sync::Arc::default(), std::sync::Arc::default()];
    super::tests::client(&mut pair).set_qlog(Box::new(SharedLog(std::sync::Arc::clone(&logs[0]))));
    assert!(confirm_handshake(&mut pair));
    assert!(!super::tests::client(&mut pair).shared.mp.enabled, "a single-path connection");
    let h = pair.server.handles()[0];
    pair.server.connection_mut(h).expect("server").set_qlog(Box::new(SharedLog(std::sync::Arc::clone(&logs[1]))));
    super::tests::run_upload(&mut pair, 6_000_000, Duration::from_secs(30));
    // A 20 ms RTT: a PTO is well above that, three of them above 60 ms.
    let local_updates = local_updates_apart(&logs, 3 * 2 * pair.latency);
    assert!(local_updates >= 3, "{local_updates} key updates: {logs:?}");
}
