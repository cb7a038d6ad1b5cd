//! What the runtime drives for the API: the protocol endpoint, and the wakers of the
//! application's futures, woken from the endpoint's events after every round of I/O.

use std::collections::{HashMap, VecDeque};
use std::ops::ControlFlow;
use std::task::Waker;

use mpq_io::address_watch::AddressWatch;
use mpq_io::EndpointApp;
use mpq_proto::conn::{ConnectionError, Event, PathEvent};
use mpq_proto::endpoint::{ConnectionHandle, Endpoint};
use mpq_proto::path_manager::PathManager;
use mpq_proto::stream::StreamEvent;
use mpq_proto::types::StreamId;
use mpq_proto::Instant;

use crate::due::Due;

/// Path events kept per connection for [`crate::Connection::path_event`]; older ones are
/// dropped (a count of them is kept) when the application does not read them.
const PATH_EVENTS_KEPT: usize = 256;

/// The endpoint and the application's waiting futures.
pub(crate) struct ApiDriver {
    pub endpoint: Endpoint,
    pub conns: HashMap<ConnectionHandle, ConnState>,
    /// Server connections that completed their handshake, not yet accepted.
    pub incoming: VecDeque<ConnectionHandle>,
    /// Server connections still in their handshake.
    pub handshaking: Vec<ConnectionHandle>,
    pub accept_wakers: Vec<Waker>,
    /// The endpoint no longer accepts connections: the application's error code and reason
    /// of [`crate::Endpoint::close`], with which a connection that comes after is closed.
    pub closed: Option<(u64, Vec<u8>)>,
    /// Client connections following the operating system's changes of their local
    /// addresses (`mpq_io::address_watch`), with the endpoint's bound addresses (empty: none
    /// follows).
    watches: HashMap<ConnectionHandle, AddressWatch>,
    bound: Vec<std::net::SocketAddr>,
    /// Client connections whose paths a path manager keeps open
    /// ([`crate::Connection::set_path_manager`]), with the connection's generation.
    pub managers: HashMap<ConnectionHandle, (u64, PathManager)>,
    /// The connections whose address watch must run (an event, or its next check).
    watches_due: Due,
    /// Tests: the runtime thread panics at its next round.
    #[cfg(test)]
    pub boom: bool,
    /// Wakers of futures that the last round made ready, woken by the runtime once it let go
    /// of the endpoint's lock ([`mpq_io::Driver::take_wakes`]), not under it.
    pub wakes: Vec<Waker>,
    /// Generation of the next connection: the endpoint reuses a gone connection's handle,
    /// so the API's handles carry the generation too and a stale one finds its
    /// connection gone instead of another one.
    next_gen: u64,
}

/// What the API keeps of one connection.
#[derive(Default)]
pub(crate) struct ConnState {
    /// Which connection of the handle this is ([`ApiDriver::fresh`]).
    pub gen: u64,
    pub connected: bool,
    /// The handshake is confirmed (RFC 9001 §4.1.2): multipath, if negotiated, is usable.
    pub confirmed: bool,
    pub error: Option<ConnectionError>,
    pub drained: bool,
    pub readable: HashMap<StreamId, Vec<Waker>>,
    pub writable: HashMap<StreamId, Vec<Waker>>,
    /// Futures waiting for anything else (the handshake, a stream to open or accept, a
    /// path event, the close).
    pub general: Vec<Waker>,
    /// Datagram reads answered in a row without waiting (they yield now and then: `coop.rs`).
    pub datagram_reads: crate::coop::Budget,
    pub path_events: VecDeque<PathEvent>,
    pub path_events_dropped: u64,
    /// Set only in the state a future sees once the runtime failed.
    pub runtime_failed: bool,
    /// The connection as it was when it was lost, for [`crate::Connection::final_report`].
    pub at_close: Option<crate::connection::FinalReport>,
}

impl ConnState {
    /// Every future waiting on the connection, into `wakes` (to be woken).
    fn wake_all(&mut self, wakes: &mut Vec<Waker>) {
        wakes.extend(self.readable.drain().chain(self.writable.drain()).flat_map(|(_, v)| v));
        self.wake_general(wakes);
    }

    /// The futures waiting for anything but a stream, into `wakes` (to be woken).
    fn wake_general(&mut self, wakes: &mut Vec<Waker>) {
        wakes.append(&mut self.general);
    }
}

/// Adds `w` to `list` unless a waker that wakes the same task is there.
pub(crate) fn register(list: &mut Vec<Waker>, w: &Waker) {
    if !list.iter().any(|x| x.will_wake(w)) {
        list.push(w.clone());
    }
}

impl ApiDriver {
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            conns: HashMap::new(),
            incoming: VecDeque::new(),
            handshaking: Vec::new(),
            accept_wakers: Vec::new(),
            closed: None,
            watches: HashMap::new(),
            bound: Vec::new(),
            managers: HashMap::new(),
            watches_due: Due::default(),
            #[cfg(test)]
            boom: false,
            wakes: Vec::new(),
            next_gen: 1,
        }
    }

    /// The endpoint's bound addresses, which client connections' address watches check.
    pub fn set_bound(&mut self, bound: Vec<std::net::SocketAddr>) {
        self.bound = bound;
    }

    /// Client connection `h` follows its local addresses' changes from now on (unless the
    /// endpoint ignores them: no bound addresses were set).
    pub fn watch(&mut self, h: ConnectionHandle) {
        if !self.bound.is_empty() {
            self.watches.insert(h, AddressWatch::new(&self.bound));
            self.watches_due.kick(h);
        }
    }

    /// Runs the address watches that are due; forgets those of connections that are gone.
    fn watch_addresses(&mut self, now: Instant) {
        for h in self.watches_due.take(now) {
            let Some(w) = self.watches.get_mut(&h) else { continue };
            match self.endpoint.connection_mut(h) {
                Some(c) if !c.is_closed() => {
                    w.poll(now, c);
                    if let Some(t) = w.timeout() {
                        self.watches_due.at(t, h);
                    }
                }
                _ => {
                    self.watches.remove(&h);
                }
            }
        }
    }

    /// Runs the path managers (opening the paths that are missing once multipath is in
    /// use); forgets those of connections that are gone or closed (every wake: only the
    /// connections given a manager have one, so idle single-path connections cost nothing
    /// here).
    fn manage_paths(&mut self, now: Instant) {
        let ApiDriver { endpoint, conns, managers, .. } = self;
        managers.retain(|&h, (gen, m)| {
            let ours = conns.get(&h).is_some_and(|st| st.gen == *gen);
            match endpoint.connection_mut(h) {
                Some(c) if ours && !c.is_closed() => {
                    if c.is_multipath() && m.pairs().len() > 1 {
                        m.poll(now, c);
                    }
                    true
                }
                _ => false,
            }
        });
    }

    /// A new connection under handle `h`: a fresh state; returns its generation.
    pub fn fresh(&mut self, h: ConnectionHandle) -> u64 {
        let gen = self.next_gen;
        self.next_gen += 1;
        self.conns.insert(h, ConnState { gen, ..ConnState::default() });
        gen
    }

    /// Every event of the endpoint, to the futures waiting for it (and the path events to
    /// the path managers).
    fn dispatch(&mut self, now: Instant) {
        while let Some(h) = self.endpoint.accept() {
            self.fresh(h);
            if let Some((code, reason)) = &self.closed {
                // A client that came after the close is closed as the others were: it would
                // otherwise complete its handshake, never be accepted, and learn nothing
                // until its idle timeout.
                if let Some(c) = self.endpoint.connection_mut(h) {
                    c.close(now, *code, reason);
                }
                continue;
            }
            self.handshaking.push(h);
        }
        while let Some((h, ev)) = self.endpoint.poll_event() {
            let st = self.conns.entry(h).or_default();
            match ev {
                Event::Connected => {
                    st.connected = true;
                    st.wake_general(&mut self.wakes);
                }
                Event::HandshakeConfirmed => {
                    // (Multipath is usable, and the addresses can be checked.)
                    self.watches_due.kick(h);
                    st.confirmed = true;
                    st.wake_general(&mut self.wakes);
                }
                Event::Stream(StreamEvent::Readable { id }) | Event::Stream(StreamEvent::Reset { id, .. }) => {
                    self.wakes.extend(st.readable.remove(&id).into_iter().flatten());
                }
                Event::Stream(StreamEvent::Writable { id })
                | Event::Stream(StreamEvent::Stopped { id, .. })
                | Event::Stream(StreamEvent::Finished { id }) => {
                    self.wakes.extend(st.writable.remove(&id).into_iter().flatten());
                    st.wake_general(&mut self.wakes);
                }
                Event::Path(pe) => {
                    if let Some(w) = self.watches.get_mut(&h) {
                        w.on_event(&pe);
                        self.watches_due.kick(h);
                    }
                    if let Some((_, m)) = self.managers.get_mut(&h).filter(|(gen, _)| *gen == st.gen) {
                        m.on_event(now, &pe);
                    }
                    if st.path_events.len() >= PATH_EVENTS_KEPT {
                        st.path_events.pop_front();
                        st.path_events_dropped += 1;
                    }
                    st.path_events.push_back(pe);
                    st.wake_general(&mut self.wakes);
                }
                Event::ConnectionLost(e) => {
                    // (Its watch finds the connection closed and goes.)
                    self.watches_due.kick(h);
                    // (The protocol's connection is still there, draining: its figures now
                    // are its figures at the end.)
                    st.at_close = self.endpoint.connection(h).map(|c| crate::connection::FinalReport {
                        error: e.clone(),
                        remote: c.remote_address(),
                        multipath: c.is_multipath(),
                        stats: c.stats(),
                    });
                    st.error = Some(e);
                    st.wake_all(&mut self.wakes);
                }
                Event::Drained => {
                    st.drained = true;
                    st.wake_all(&mut self.wakes);
                }
                _ => st.wake_general(&mut self.wakes),
            }
        }
        // Server connections are handed out once their handshake completed.
        let mut i = 0;
        while i < self.handshaking.len() {
            let h = self.handshaking[i];
            let st = self.conns.entry(h).or_default();
            if st.connected || st.error.is_some() || st.drained {
                self.handshaking.swap_remove(i);
                if st.connected && st.error.is_none() {
                    self.incoming.push_back(h);
                    self.wakes.append(&mut self.accept_wakers);
                }
            } else {
                i += 1;
            }
        }
    }
}

impl EndpointApp for ApiDriver {
    fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    fn on_wake(&mut self, now: Instant) -> ControlFlow<()> {
        #[cfg(test)]
        assert!(!self.boom, "the test's deliberate panic in the runtime");
        self.dispatch(now);
        self.watch_addresses(now);
        self.manage_paths(now);
        // The runtime stops when the application's last handle goes, not from here.
        ControlFlow::Continue(())
    }

    fn app_timeout(&mut self) -> Option<Instant> {
        let managers = self.managers.values().filter_map(|(_, m)| m.poll_timeout());
        managers.chain(self.watches_due.next()).min()
    }

    /// Every waiting future wakes, and finds [`crate::Error::RuntimeFailed`].
    fn on_runtime_failure(&mut self) {
        // (The runtime is over: nothing else wakes them.)
        let mut wakes = std::mem::take(&mut self.wakes);
        wakes.append(&mut self.accept_wakers);
        for st in self.conns.values_mut() {
            st.wake_all(&mut wakes);
        }
        wakes.into_iter().for_each(Waker::wake);
    }

    fn take_wakes(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.wakes)
    }
}
