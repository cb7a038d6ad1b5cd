//! The emulator's real-time loop, inside the router namespace: read every packet the
//! kernel routes into the paths' TUN devices, offer it to its link ([`Emulator`]) at the
//! wall-clock instant it was read, and write it back into the same device when the model
//! says it arrives. A thread per path sleeps in `ppoll` with a nanosecond timeout until the
//! next delivery or packet; the main thread answers the control socket. With a shared
//! bottleneck the paths share a link, so one thread runs them all (and the competitor's
//! path) in one [`Emulator`].

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mpq_proto::Instant;
use mpq_sim::LinkConfig;

use super::core::{Emulator, PathSetup, TimedEvent};
use crate::testbed::control::{BottleneckReport, LinkReport, PathReport, Report};
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
    /// The link every path crosses, if the testbed has a shared bottleneck; then the last of
    /// `paths` is the competitor's (not one of the testbed's paths).
    pub bottleneck: Option<LinkConfig>,
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
        let bottleneck = match &state.bottleneck {
            None => None,
            Some(b) => {
                let spec = PathSpec::parse(&b.link).map_err(|e| format!("bottleneck: {e}"))?;
                if spec.c2s != spec.s2c {
                    return Err(format!("bottleneck {:?}: one link for both directions", b.link));
                }
                // The competitor's path: no limit and no delay of its own, as in the simulator.
                let plan = PathPlan::new(state.paths.len(), b.competitor.mtu);
                let own = PathSpec::parse(&b.competitor.link).map_err(|e| format!("competitor: {e}"))?;
                paths.push(PathSetup { c2s: own.c2s, s2c: own.s2c, client_subnet: plan.client_subnet() });
                tuns.push(plan.tun());
                Some(spec.c2s)
            }
        };
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
        Ok(Config { paths, events, tuns, seed: state.seed, bottleneck })
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
    // Independent paths: an emulator and a thread each. A shared bottleneck: one for all.
    let groups: Vec<Vec<usize>> = match cfg.bottleneck {
        None => (0..cfg.paths.len()).map(|i| vec![i]).collect(),
        Some(_) => vec![(0..cfg.paths.len()).collect()],
    };
    let paths: Vec<Arc<Mutex<PathEmulator>>> = match cfg.bottleneck.clone() {
        None => cfg
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| Emulator::single_path(i, p.clone(), cfg.seed, &cfg.events))
            .map(|emu| Arc::new(Mutex::new(PathEmulator { emu, write_errors: 0 })))
            .collect(),
        Some(b) => {
            let emu = Emulator::with_bottleneck(cfg.paths.clone(), b, cfg.seed, cfg.events.clone());
            vec![Arc::new(Mutex::new(PathEmulator { emu, write_errors: 0 }))]
        }
    };
    // Path i of the testbed is path `slots[i].1` of emulator `slots[i].0`.
    let slots: Vec<(usize, usize)> =
        groups.iter().enumerate().flat_map(|(g, members)| (0..members.len()).map(move |k| (g, k))).collect();
    let clock = Clock::start();
    let started = unix_now_ns();
    let mut tuns: Vec<Option<File>> = tuns.into_iter().map(Some).collect();
    let threads: Vec<_> = groups
        .iter()
        .zip(&paths)
        .map(|(members, p)| {
            let files: Vec<File> = members.iter().filter_map(|&i| tuns[i].take()).collect();
            let devs: Vec<String> = members.iter().map(|&i| cfg.tuns[i].clone()).collect();
            let p = p.clone();
            std::thread::Builder::new()
                .name(format!("emulator-{}", devs.join("+")))
                .spawn(move || path_loop(&files, &devs, &p, clock))
                .map_err(|e| format!("starting a path thread: {e}"))
        })
        .collect::<Result<_, _>>()?;
    writeln!(ready, "ready {started}").and_then(|_| ready.flush()).map_err(|e| e.to_string())?;
    eprintln!("emulator of testbed {name}: {} path(s), started at {started} ns", slots.len());
    let shared = cfg.bottleneck.is_some();
    let control = Control { emulators: &paths, slots: &slots, devs: &cfg.tuns, clock, shared };
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

/// The thread of an emulator: sleep until a packet is readable on one of its paths'
/// devices (`tuns[i]` is its path i) or the next one is due, read, offer, deliver.
fn path_loop(tuns: &[File], devs: &[String], p: &Mutex<PathEmulator>, clock: Clock) {
    sys::tight_timer_slack();
    let fds: Vec<_> = tuns.iter().map(|t| t.as_raw_fd()).collect();
    let mut ready = Vec::with_capacity(fds.len());
    let mut buf = vec![0u8; 65536];
    while !sys::stop_requested() {
        let wait = {
            let mut g = lock(p);
            deliver(&mut g, tuns, &clock);
            g.emu.time_to_next(clock.now()).map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT))
        };
        if let Err(e) = sys::wait_readable(&fds, Some(wait), &mut ready) {
            eprintln!("ppoll on {}: {e}", devs.join(", "));
            return;
        }
        for (i, _) in ready.iter().enumerate().filter(|(_, &r)| r) {
            read_batch(&mut lock(p), tuns, i, &devs[i], &mut buf, &clock);
        }
    }
}

/// Writes every packet due by now back into its path's device.
fn deliver(p: &mut PathEmulator, tuns: &[File], clock: &Clock) {
    let errors = &mut p.write_errors;
    p.emu.advance(clock.now(), |path, pkt| {
        if (&tuns[path]).write(pkt).is_err() {
            *errors += 1;
        }
    });
}

fn read_batch(p: &mut PathEmulator, tuns: &[File], path: usize, dev: &str, buf: &mut [u8], clock: &Clock) {
    let mut tun = &tuns[path];
    for _ in 0..READ_BATCH {
        match tun.read(buf) {
            Ok(0) => break,
            Ok(n) => {
                let mut b = p.emu.buffer();
                b.extend_from_slice(&buf[..n]);
                p.emu.offer(clock.now(), path, b);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => {
                eprintln!("reading {dev}: {e}");
                break;
            }
        }
        // A zero-delay link's packets are due at once.
        deliver(p, tuns, clock);
    }
}

/// The control socket's side: requests about every path.
struct Control<'a> {
    emulators: &'a [Arc<Mutex<PathEmulator>>],
    /// Path i is path `slots[i].1` of emulator `slots[i].0` (the competitor's path last).
    slots: &'a [(usize, usize)],
    devs: &'a [String],
    clock: Clock,
    /// A shared bottleneck: one emulator, and the last slot is the competitor's path.
    shared: bool,
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
        let paths = self.slots.len() - usize::from(self.shared);
        let Some(&(g, k)) = self.slots.get(e.path).filter(|_| e.path < paths) else {
            return Err(format!("there is no path {} (paths 0..{paths})", e.path));
        };
        let mut g = lock(&self.emulators[g]);
        let now = self.clock.now();
        for d in e.dirs {
            g.emu.apply_now(now, k, d, &e.event);
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
            bottleneck: None,
            competitor: None,
        };
        for p in self.emulators {
            let g = lock(p);
            r.in_flight += g.emu.in_flight();
            r.not_ipv4 += g.emu.unmodelled.not_ipv4;
            r.write_errors += g.write_errors;
            if let (Some(c2s), Some(s2c)) = (g.emu.bottleneck(Direction::C2s), g.emu.bottleneck(Direction::S2c)) {
                let link = |l: &mpq_sim::Link| LinkReport::new(&l.config, &l.stats, l.is_up());
                r.bottleneck = Some(BottleneckReport { c2s: link(c2s), s2c: link(s2c) });
            }
        }
        for (i, (&(e, k), dev)) in self.slots.iter().zip(self.devs).enumerate() {
            let g = lock(&self.emulators[e]);
            let link = |d| LinkReport::new(g.emu.config(k, d), g.emu.stats(k, d), g.emu.is_up(k, d));
            let report =
                PathReport { c2s: link(Direction::C2s), s2c: link(Direction::S2c), kernel_drops: kernel_drops(dev) };
            if self.shared && i + 1 == self.slots.len() {
                r.competitor = Some(report);
            } else {
                r.paths.push(report);
            }
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
