//! The testbed leaves nothing behind: `down` after the emulator was killed (and with a
//! process of the user's still in a namespace), an `up` that fails at any step, an `up`
//! interrupted by SIGINT, and the refusals that keep two testbeds apart. Needs root; see
//! common/testbed.rs for skipping.

use std::net::{SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpq_lab::testbed::plan::{Names, Plan};
use mpq_lab::testbed::{host, probe, state::State, sys};

#[path = "common/testbed.rs"]
mod testbed;

use testbed::{assert_gone, available, mpq, name, poll_until, Testbed};

#[test]
fn down_removes_everything_after_the_emulator_was_killed() {
    if !available() {
        return;
    }
    let n = name("killed");
    let tb = Testbed::up(&n, &["--link", "10mbit/4ms", "--link", "10mbit/4ms"]);
    let (cns, sns) = (tb.field("client_ns"), tb.field("server_ns"));
    let (c, s) = tb.path(0);
    let to = SocketAddr::V4(SocketAddrV4::new(s, 7000));
    let echo = probe::echo(&sns, to).unwrap();
    let ok = probe::rtt(&cns, c, to, 5, Duration::from_millis(5), 64, Duration::from_secs(2)).unwrap();
    assert_eq!(ok.received, 5, "the testbed works before the kill");
    // A process of the user's inside the server namespace, which `down` must stop too.
    let mut user = Command::new("ip")
        .args(["netns", "exec", &sns, "sleep", "600"])
        .stdin(Stdio::null())
        .spawn()
        .expect("ip netns exec sleep");
    let emulator = tb.emulator_pid();
    sys::kill(emulator, libc::SIGKILL).unwrap();
    assert!(poll_until(Duration::from_secs(5), || !host::alive(emulator)), "the emulator survived SIGKILL");
    // Without the emulator nothing crosses: the paths fail closed, they do not bypass it.
    let dead = probe::rtt(&cns, c, to, 5, Duration::from_millis(5), 64, Duration::from_millis(300)).unwrap();
    assert_eq!(dead.received, 0, "traffic bypassed a dead emulator");
    drop(echo);
    let list = mpq(&["lab", "testbed", "list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("NOT RUNNING"), "{list:?}");
    let out = mpq(&["lab", "testbed", "down", "--name", &n]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The user's process was stopped: reap it (it is our child), bounded.
    assert!(
        poll_until(Duration::from_secs(5), || user.try_wait().ok().flatten().is_some()),
        "sleep in the namespace survived"
    );
    assert_gone(&n, &[emulator]);
    std::mem::forget(tb); // already down
}

#[test]
fn an_up_that_fails_at_any_step_leaves_nothing() {
    if !available() {
        return;
    }
    let n = name("fail");
    let mut plan = Plan::new(Names::new(&n).unwrap(), &[1500, 1500]).unwrap();
    // `up` adds MPTCP's steps when the kernel has it: count them too.
    plan.mptcp = mpq_lab::testbed::host::has_mptcp();
    let steps = plan.steps().len();
    // The first step, a few in the middle, the last; past the end nothing is injected.
    for step in [0, 7, steps / 2, steps - 1, steps].map(|s| s.to_string()) {
        let step = step.as_str();
        let out = Command::new(env!("CARGO_BIN_EXE_mpq"))
            .args(["lab", "testbed", "up", "--name", &n, "--link", "1mbit/2ms", "--link", "1mbit/2ms"])
            .env("MPQ_TESTBED_FAIL_AT_STEP", step)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            // Past the last step: nothing was injected; that is the control case.
            assert_eq!(step, steps.to_string(), "step {step} did not fail");
            let out = mpq(&["lab", "testbed", "down", "--name", &n]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        } else {
            assert!(err.contains("injected") && err.contains("removed"), "step {step}: {err}");
        }
        assert_gone(&n, &[]);
    }
}

#[test]
fn an_interrupted_up_leaves_nothing() {
    if !available() {
        return;
    }
    let n = name("sigint");
    // Interrupt at a few points of the build; whatever the timing, either `up` removed what
    // it built, or it had finished (and `down` removes the testbed).
    for delay_ms in [0u64, 20, 60] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mpq"))
            .args(["lab", "testbed", "up", "--name", &n, "--link", "1mbit", "--link", "1mbit", "--link", "1mbit"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until it has recorded the testbed (it is building), then a little more.
        assert!(poll_until(Duration::from_secs(10), || State::file(&n).exists()
            || child.try_wait().ok().flatten().is_some()));
        let mark = host::Deadline::after(Duration::from_millis(delay_ms));
        poll_until(Duration::from_secs(1), || mark.passed());
        let _ = sys::kill(child.id(), libc::SIGINT);
        let out = child.wait_with_output().unwrap();
        eprintln!(
            "SIGINT {delay_ms} ms into building: up {}",
            if out.status.success() { "had finished" } else { "stopped" }
        );
        if out.status.success() {
            let d = mpq(&["lab", "testbed", "down", "--name", &n]);
            assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("interrupted"), "after {delay_ms} ms: {err}");
        }
        assert_gone(&n, &[]);
    }
}

#[test]
fn testbeds_are_kept_apart_and_down_is_idempotent() {
    if !available() {
        return;
    }
    let n = name("twice");
    let tb = Testbed::up(&n, &["--link", "1mbit"]);
    let again = mpq(&["lab", "testbed", "up", "--name", &n, "--link", "1mbit"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"), "{again:?}");
    // A second testbed beside it, with its own namespaces.
    let other = Testbed::up(&name("beside"), &["--link", "2mbit"]);
    assert_ne!(other.field("client_ns"), tb.field("client_ns"));
    let pid = tb.emulator_pid();
    drop(tb);
    assert_gone(&n, &[pid]);
    let out = mpq(&["lab", "testbed", "down", "--name", &n]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to remove"));
    // Bad input is refused before anything is built.
    let bad = mpq(&["lab", "testbed", "up", "--name", &n, "--link", "50mbit/20ms,queue=10ms"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("separated by '/'"), "{bad:?}");
    assert_gone(&n, &[]);
}
