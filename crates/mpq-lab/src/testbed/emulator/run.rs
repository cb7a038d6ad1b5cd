//! The emulator's real-time loop, inside the router namespace: read every packet the
//! kernel routes into the paths' TUN devices, offer it to its link ([`Emulator`]) at the
//! wall-clock instant it was read, and write it back into the same device when the model
//! says it arrives. A thread per path sleeps in `ppoll` with a nanosecond timeout until the
//! next delivery or packet; the main thread answers the control socket.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mpq_proto::Instant;

use super::core::{Emulator, PathSetup, TimedEvent};
use crate::testbed::control::{LinkReport, PathReport, Report};
use crate::testbed::host::unix_now_ns;
use crate::testbed::plan::PathPlan;
use crate::testbed::spec::{Direction, EventSpec, PathSpec};
use crate::testbed::state::State;
use crate::testbed::sys;

/// The longest the loop sleeps with nothing due (it also wakes for packets, requests and
/// signals; this bounds the wait if a signal slips in just before the sleep).
const IDLE_WAIT: Duration = Duration::from_millis(200);
/// The most packets read before due deliveries are written again, so that reading a flood
/// does not hold back the path's deliveries (each read packet also lets zero-delay ones out).
const READ_BATCH: usize = 64;

/// The emulator's real-time priority with `--realtime` (low among real-time threads: the
/// kernel's own, such as the migration and watchdog threads at 99, stay above it).
const REALTIME_PRIORITY: i32 = 10;

/// The wall clock mapped onto the link model's [`Instant`] (nanoseconds since the start).
#[derive(Clone, Copy)]
struct Clock(std::time::Instant);

impl Clock {
    #[allow(clippy::disallowed_methods)] // the emulator is where real time enters the model
    fn start() -> Self {
        Clock(std::time::Instant::now())
    }

    #[allow(clippy::disallowed_methods)] // the emulator is where real time enters the model
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// The emulator's configuration, from a state file.
pub struct Config {
    /// The paths' links and subnets.
    pub paths: Vec<PathSetup>,
    /// Scripted events, their times from the start.
    pub events: Vec<TimedEvent>,
    /// The TUN device of each path.
    pub tuns: Vec<String>,
    /// The seed.
    pub seed: u64,
}

impl Config {
    /// Parses the specs recorded in `state`.
    pub fn from_state(state: &State) -> Result<Config, String> {
        let mut paths = Vec::new();
        let mut tuns = Vec::new();
        for (i, p) in state.paths.iter().enumerate() {
            let spec = PathSpec::parse(&p.link).map_err(|e| e.to_string())?;
            let plan = PathPlan::new(i, p.mtu);
            paths.push(PathSetup { c2s: spec.c2s, s2c: spec.s2c, client_subnet: plan.client_subnet() });
            tuns.push(plan.tun());
        }
        let mut events = Vec::new();
        for e in &state.events {
            let spec = EventSpec::parse_scripted(e).map_err(|e| e.to_string())?;
            if spec.path >= paths.len() {
                return Err(format!("event {e:?}: there is no path {} (paths 0..{})", spec.path, paths.len()));
            }
            let at = Instant::ZERO + spec.at.unwrap_or_default();
            for &dir in &spec.dirs {
                events.push(TimedEvent { at, path: spec.path, dir, event: spec.event.clone() });
            }
        }
        Ok(Config { paths, events, tuns, seed: state.seed })
    }
}

/// Runs testbed `name`'s emulator until SIGINT or SIGTERM. Once its devices and control
/// socket are open, writes `ready STARTED_UNIX_NS` to `ready` (the clock's start, from which
/// event times count).
///
/// Each path runs on a thread of its own with its own [`Emulator`] (paths share nothing in
/// the model), so paths do not take each other's time; the calling thread answers the
/// control socket.
pub fn run(name: &str, ready: &mut dyn Write) -> Result<(), String> {
    let state = State::load(name).map_err(|e| e.to_string())?.ok_or_else(|| format!("no testbed named {name}"))?;
    let cfg = Config::from_state(&state)?;
    sys::catch_stop_signals(false);
    if state.realtime {
        // Threads started from here on inherit the class.
        sys::set_realtime(REALTIME_PRIORITY).map_err(|e| format!("real-time scheduling: {e}"))?;
    }
    let tuns =
        cfg.tuns.iter().map(|t| sys::tun_attach(t)).collect::<io::Result<Vec<File>>>().map_err(|e| e.to_string())?;
    let sock = State::control_socket(name);
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).map_err(|e| format!("{}: {e}", sock.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let paths: Vec<Arc<Mutex<PathEmulator>>> = cfg
        .paths
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let emu = Emulator::single_path(i, p, cfg.seed, &cfg.events);
            Arc::new(Mutex::new(PathEmulator { emu, write_errors: 0 }))
        })
        .collect();
    let clock = Clock::start();
    let started = unix_now_ns();
    let threads: Vec<_> = tuns
        .into_iter()
        .zip(&paths)
        .zip(&cfg.tuns)
        .map(|((tun, p), dev)| {
            let (p, dev) = (p.clone(), dev.clone());
            std::thread::Builder::new()
                .name(format!("emulator-{dev}"))
                .spawn(move || path_loop(&tun, &dev, &p, clock))
                .map_err(|e| format!("starting a path thread: {e}"))
        })
        .collect::<Result<_, _>>()?;
    writeln!(ready, "ready {started}").and_then(|_| ready.flush()).map_err(|e| e.to_string())?;
    eprintln!("emulator of testbed {name}: {} path(s), started at {started} ns", paths.len());
    let control = Control { paths: &paths, devs: &cfg.tuns, clock };
    let result = control.run(&listener);
    for t in threads {
        let _ = t.join();
    }
    let _ = std::fs::remove_file(&sock);
    eprintln!("emulator of testbed {name}: stopping ({result:?})");
    result
}

/// One path's model and its write errors, shared by its thread and the control thread.
struct PathEmulator {
    emu: Emulator,
    write_errors: u64,
}

/// Locks a path's state; a thread that panicked while holding it left nothing half-done
/// that matters here (counters and queues), so carry on.
fn lock(p: &Mutex<PathEmulator>) -> std::sync::MutexGuard<'_, PathEmulator> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// A path's thread: sleep until a packet is readable or the next one is due, read, offer,
/// deliver.
fn path_loop(tun: &File, dev: &str, p: &Mutex<PathEmulator>, clock: Clock) {
    sys::tight_timer_slack();
    let fd = [tun.as_raw_fd()];
    let mut ready = Vec::with_capacity(1);
    let mut buf = vec![0u8; 65536];
    while !sys::stop_requested() {
        let wait = {
            let mut g = lock(p);
            deliver(&mut g, tun, &clock);
            g.emu.time_to_next(clock.now()).map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT))
        };
        if let Err(e) = sys::wait_readable(&fd, Some(wait), &mut ready) {
            eprintln!("ppoll on {dev}: {e}");
            return;
        }
        if ready.first().copied().unwrap_or(false) {
            read_batch(&mut lock(p), tun, dev, &mut buf, &clock);
        }
    }
}

/// Writes every packet due by now back into the path's device.
fn deliver(p: &mut PathEmulator, mut tun: &File, clock: &Clock) {
    let errors = &mut p.write_errors;
    p.emu.advance(clock.now(), |_, pkt| {
        if tun.write(pkt).is_err() {
            *errors += 1;
        }
    });
}

fn read_batch(p: &mut PathEmulator, mut tun: &File, dev: &str, buf: &mut [u8], clock: &Clock) {
    for _ in 0..READ_BATCH {
        match tun.read(buf) {
            Ok(0) => break,
            Ok(n) => {
                let mut b = p.emu.buffer();
                b.extend_from_slice(&buf[..n]);
                p.emu.offer(clock.now(), 0, b);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => {
                eprintln!("reading {dev}: {e}");
                break;
            }
        }
        // A zero-delay link's packets are due at once.
        deliver(p, tun, clock);
    }
}

/// The control socket's side: requests about every path.
struct Control<'a> {
    paths: &'a [Arc<Mutex<PathEmulator>>],
    devs: &'a [String],
    clock: Clock,
}

impl Control<'_> {
    fn run(&self, listener: &UnixListener) -> Result<(), String> {
        let fd = [listener.as_raw_fd()];
        let mut ready = Vec::with_capacity(1);
        while !sys::stop_requested() {
            sys::wait_readable(&fd, Some(IDLE_WAIT), &mut ready).map_err(|e| format!("ppoll: {e}"))?;
            while let Ok((stream, _)) = listener.accept() {
                if let Err(e) = self.answer(stream) {
                    eprintln!("control request: {e}");
                }
            }
        }
        Ok(())
    }

    fn answer(&self, stream: UnixStream) -> io::Result<()> {
        stream.set_nonblocking(false)?;
        // The request is one short line a client writes before it reads: a client that
        // holds it back delays other requests (not the paths) by at most this long.
        stream.set_read_timeout(Some(Duration::from_millis(100)))?;
        stream.set_write_timeout(Some(Duration::from_millis(100)))?;
        let mut line = String::new();
        BufReader::new(&stream).take(4096).read_line(&mut line)?;
        let line = line.trim();
        let answer = match line.split_once(' ') {
            _ if line == "stats" => serde_json::to_string(&self.report()).map_err(io::Error::other)?,
            Some(("event", spec)) => match self.event(spec.trim()) {
                Ok(()) => "{\"ok\":true}".to_owned(),
                Err(e) => serde_json::json!({ "error": e }).to_string(),
            },
            _ => serde_json::json!({ "error": format!("unknown request {line:?}: stats or event PATH[.DIR]:ACTION") })
                .to_string(),
        };
        (&stream).write_all(format!("{answer}\n").as_bytes())
    }

    fn event(&self, spec: &str) -> Result<(), String> {
        let e = EventSpec::parse_now(spec).map_err(|e| e.to_string())?;
        let Some(p) = self.paths.get(e.path) else {
            return Err(format!("there is no path {} (paths 0..{})", e.path, self.paths.len()));
        };
        let mut g = lock(p);
        let now = self.clock.now();
        for d in e.dirs {
            g.emu.apply_now(now, 0, d, &e.event);
        }
        Ok(())
    }

    fn report(&self) -> Report {
        let mut r = Report {
            uptime_s: self.clock.now().since_epoch().as_secs_f64(),
            in_flight: 0,
            not_ipv4: 0,
            write_errors: 0,
            paths: Vec::new(),
        };
        for (p, dev) in self.paths.iter().zip(self.devs) {
            let g = lock(p);
            let link = |d| LinkReport::new(g.emu.config(0, d), g.emu.stats(0, d), g.emu.is_up(0, d));
            r.in_flight += g.emu.in_flight();
            r.not_ipv4 += g.emu.unmodelled.not_ipv4;
            r.write_errors += g.write_errors;
            r.paths.push(PathReport {
                c2s: link(Direction::C2s),
                s2c: link(Direction::S2c),
                kernel_drops: kernel_drops(dev),
            });
        }
        r
    }
}

/// Packets the kernel dropped at device `dev`'s transmit queue (the emulator's input).
fn kernel_drops(dev: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/tx_dropped"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}
