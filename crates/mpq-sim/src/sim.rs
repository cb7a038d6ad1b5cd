//! The discrete-event simulator: virtual clock, event queue, nodes, addresses and routes.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

use mpq_proto::Instant;
use rustc_hash::FxHashMap;

use crate::link::{DropReason, Fate, Link, LinkConfig, LinkEvent, LinkStats};
use crate::nat::{Inbound, Nat, NatId};
use crate::node::{Datagram, Node};

/// Handle of a node added with [`Simulator::add_node`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

/// Handle of a directed link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(u32);

impl NodeId {
    /// Index of the node in creation order.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl LinkId {
    /// Index of the link in creation order.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Simulator-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Events processed.
    pub events: u64,
    /// Datagrams sent with no route for their (src, dst) pair.
    pub unroutable: u64,
    /// Datagrams that reached a destination address owned by no node.
    pub no_host: u64,
    /// Datagrams handed to nodes.
    pub delivered: u64,
    /// Datagrams dropped by a [`Nat`] for a stale mapping.
    pub nat_dropped: u64,
}

enum Event {
    /// A packet reaches the far end of `route[hop]`.
    Arrive {
        route: u32,
        hop: u32,
        epoch: u32,
        pkt: Datagram,
    },
    Timer {
        node: u32,
        generation: u64,
    },
    Poll {
        node: u32,
    },
    Link {
        link: u32,
        ev: LinkEvent,
    },
}

struct Scheduled {
    at: Instant,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    /// Reversed, so the max-heap pops the earliest (time, sequence) first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct NodeSlot {
    node: Box<dyn Node>,
    /// Instant of the pending timer event, if any.
    armed: Option<Instant>,
    /// Generation of the pending timer event; older timer events are stale.
    generation: u64,
    /// Instant of the last timer expiry and how many expiries in a row happened at it.
    last_fire: (Instant, u32),
}

/// A node whose timer fires this often at one instant is not making progress.
const MAX_FIRES_PER_INSTANT: u32 = 100_000;

/// 64-bit FNV-1a, fixed and platform independent.
struct Fnv(u64);

impl Fnv {
    fn write_u64(&mut self, x: u64) {
        for b in x.to_le_bytes() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

const TRACE_DELIVER: u64 = 1;
const TRACE_NO_ROUTE: u64 = 2;
const TRACE_NO_HOST: u64 = 3;
const TRACE_NAT_DROP: u64 = 4;

/// A deterministic discrete-event network simulator.
///
/// Time is virtual and starts at [`Instant::ZERO`]; events at equal times run in the order they
/// were scheduled; all randomness comes from per-link ChaCha8 streams derived from the seed. Two
/// runs with the same seed and the same inputs are identical (compare [`trace_hash`](Self::trace_hash)).
///
/// A route maps an exact `(src, dst)` address pair to a chain of directed links; a link may be
/// part of several routes (a shared bottleneck).
pub struct Simulator {
    now: Instant,
    seed: u64,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    nodes: Vec<NodeSlot>,
    // (Fx: looked up once per datagram and never iterated, so the order cannot leak into a run.)
    owners: FxHashMap<SocketAddr, u32>,
    links: Vec<Link>,
    routes: Vec<Box<[LinkId]>>,
    route_ids: FxHashMap<(SocketAddr, SocketAddr), u32>,
    nats: Vec<Nat>,
    stats: SimStats,
    trace: Fnv,
}

impl Simulator {
    /// An empty network whose random processes are seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            now: Instant::ZERO,
            seed,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes: Vec::new(),
            owners: FxHashMap::default(),
            links: Vec::new(),
            routes: Vec::new(),
            route_ids: FxHashMap::default(),
            nats: Vec::new(),
            stats: SimStats::default(),
            trace: Fnv(0xcbf2_9ce4_8422_2325),
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The seed given to [`new`](Self::new).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    fn push(&mut self, at: Instant, event: Event) {
        let seq = self.seq;
        self.seq += 1;
        self.queue.push(Scheduled { at: at.max(self.now), seq, event });
    }

    /// Adds a node. It is first polled (transmits drained, timer armed) at the current time,
    /// once the simulation runs, so addresses and routes can be set up before.
    pub fn add_node<N: Node>(&mut self, node: N) -> NodeId {
        self.add_boxed_node(Box::new(node))
    }

    /// Adds an already boxed node; see [`add_node`](Self::add_node).
    pub fn add_boxed_node(&mut self, node: Box<dyn Node>) -> NodeId {
        let id = u32::try_from(self.nodes.len()).expect("too many nodes");
        self.nodes.push(NodeSlot { node, armed: None, generation: 0, last_fire: (Instant::ZERO, 0) });
        self.push(self.now, Event::Poll { node: id });
        NodeId(id)
    }

    /// Gives `node` the address `addr`: datagrams to `addr` are delivered to it.
    ///
    /// # Panics
    /// If another node already owns `addr`.
    pub fn add_address(&mut self, node: NodeId, addr: SocketAddr) {
        assert!(node.index() < self.nodes.len(), "unknown node {node:?}");
        if let Some(&old) = self.owners.get(&addr) {
            assert_eq!(old, node.0, "address {addr} already belongs to node {old}");
        }
        self.owners.insert(addr, node.0);
    }

    /// The node owning `addr`, if any.
    pub fn owner(&self, addr: SocketAddr) -> Option<NodeId> {
        self.owners.get(&addr).map(|&n| NodeId(n))
    }

    /// Creates a directed link (not yet part of any route).
    pub fn add_link(&mut self, config: LinkConfig) -> LinkId {
        let id = u32::try_from(self.links.len()).expect("too many links");
        self.links.push(Link::new(config, self.seed, u64::from(id)));
        LinkId(id)
    }

    /// Routes datagrams from `src` to `dst` through `links`, in order (replacing any previous
    /// route for that pair). An empty chain delivers instantly.
    pub fn route(&mut self, src: SocketAddr, dst: SocketAddr, links: &[LinkId]) {
        for l in links {
            assert!(l.index() < self.links.len(), "unknown link {l:?}");
        }
        let id = u32::try_from(self.routes.len()).expect("too many routes");
        self.routes.push(links.into());
        self.route_ids.insert((src, dst), id);
    }

    /// Connects `a` and `b` with a fresh pair of links, returning `(a→b, b→a)`.
    pub fn connect(
        &mut self,
        a: SocketAddr,
        b: SocketAddr,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> (LinkId, LinkId) {
        let ab = self.add_link(a_to_b);
        let ba = self.add_link(b_to_a);
        self.route(a, b, &[ab]);
        self.route(b, a, &[ba]);
        (ab, ba)
    }

    /// Connects `a` and `b` with two links of the same configuration (so a config parsed from
    /// `"50mbit/20ms"` gives a 20 ms propagation RTT). Returns `(a→b, b→a)`.
    pub fn connect_symmetric(&mut self, a: SocketAddr, b: SocketAddr, config: LinkConfig) -> (LinkId, LinkId) {
        self.connect(a, b, config.clone(), config)
    }

    /// Connects `a` and `b` through existing link chains (which may be shared with other
    /// routes, e.g. a common bottleneck).
    pub fn connect_via(&mut self, a: SocketAddr, b: SocketAddr, a_to_b: &[LinkId], b_to_a: &[LinkId]) {
        self.route(a, b, a_to_b);
        self.route(b, a, b_to_a);
    }

    /// Puts `nat` in front of the host owning its inside address (see [`crate::nat`]). Routes
    /// for its outside addresses are the caller's business.
    ///
    /// # Panics
    /// If another NAT already translates that inside address.
    pub fn add_nat(&mut self, nat: Nat) -> NatId {
        assert!(self.nats.iter().all(|n| n.inside() != nat.inside()), "{} is already behind a NAT", nat.inside());
        let id = u32::try_from(self.nats.len()).expect("too many NATs");
        self.nats.push(nat);
        NatId(id)
    }

    /// The NAT `id`.
    pub fn nat(&self, id: NatId) -> &Nat {
        &self.nats[id.0 as usize]
    }

    /// The NAT translating `inside`, if any.
    pub fn nat_of(&self, inside: SocketAddr) -> Option<NatId> {
        self.nats.iter().position(|n| n.inside() == inside).map(|i| NatId(i as u32))
    }

    /// From `at` on, NAT `id` maps its inside address to `outside` (see [`Nat::rebind_at`]).
    pub fn rebind_nat(&mut self, id: NatId, at: Instant, outside: SocketAddr) {
        self.nats[id.0 as usize].push_mapping(at, outside);
    }

    /// Applies `event` to `link` at time `at` (or now, if `at` has passed).
    pub fn schedule(&mut self, at: Instant, link: LinkId, event: LinkEvent) {
        assert!(link.index() < self.links.len(), "unknown link {link:?}");
        self.push(at, Event::Link { link: link.0, ev: event });
    }

    /// Polls `node` at the current time: call after changing a node from outside (e.g. through
    /// [`node_mut`](Self::node_mut)) so that its new transmits and timer are picked up.
    pub fn wake(&mut self, node: NodeId) {
        self.push(self.now, Event::Poll { node: node.0 });
    }

    /// The node `id`, downcast to its concrete type.
    ///
    /// # Panics
    /// If the node is not a `T`.
    pub fn node<T: Node>(&self, id: NodeId) -> &T {
        let any: &dyn Any = &*self.nodes[id.index()].node;
        any.downcast_ref().expect("node has a different type")
    }

    /// The node `id`, downcast to its concrete type, mutably. Call [`wake`](Self::wake) after
    /// changes that make it want to send or re-arm its timer (or use [`with_node`](Self::with_node)).
    ///
    /// # Panics
    /// If the node is not a `T`.
    pub fn node_mut<T: Node>(&mut self, id: NodeId) -> &mut T {
        let any: &mut dyn Any = &mut *self.nodes[id.index()].node;
        any.downcast_mut().expect("node has a different type")
    }

    /// Runs `f` on node `id` (downcast to `T`), then [`wake`](Self::wake)s it.
    pub fn with_node<T: Node, R>(&mut self, id: NodeId, f: impl FnOnce(&mut T) -> R) -> R {
        let r = f(self.node_mut(id));
        self.wake(id);
        r
    }

    /// Counters of `link`.
    pub fn link_stats(&self, link: LinkId) -> &LinkStats {
        &self.links[link.index()].stats
    }

    /// Current configuration of `link` (including scripted changes applied so far).
    pub fn link_config(&self, link: LinkId) -> &LinkConfig {
        &self.links[link.index()].config
    }

    /// Whether `link` is up.
    pub fn link_is_up(&self, link: LinkId) -> bool {
        self.links[link.index()].is_up()
    }

    /// Simulator-wide counters.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    /// Hash over every link delivery and drop so far (time, link, size, first payload bytes):
    /// equal for identical runs.
    pub fn trace_hash(&self) -> u64 {
        self.trace.0
    }

    /// Time of the next pending event, if any.
    pub fn next_event_time(&self) -> Option<Instant> {
        self.queue.peek().map(|s| s.at)
    }

    /// Processes the next event, advancing the clock to it. Returns `false` if there was none.
    pub fn step(&mut self) -> bool {
        let Some(Scheduled { at, event, .. }) = self.queue.pop() else {
            return false;
        };
        self.now = at;
        self.stats.events += 1;
        match event {
            Event::Arrive { route, hop, epoch, pkt } => self.arrive(route, hop, epoch, pkt),
            Event::Timer { node, generation } => {
                let slot = &mut self.nodes[node as usize];
                if slot.generation == generation && slot.armed.is_some() {
                    slot.armed = None;
                    if slot.last_fire.0 == at {
                        slot.last_fire.1 += 1;
                        assert!(
                            slot.last_fire.1 < MAX_FIRES_PER_INSTANT,
                            "node {node} keeps asking for a timeout at {at:?} without making progress"
                        );
                    } else {
                        slot.last_fire = (at, 1);
                    }
                    slot.node.handle_timeout(at);
                    self.poll(node);
                }
            }
            Event::Poll { node } => self.poll(node),
            Event::Link { link, ev } => self.links[link as usize].apply(at, &ev),
        }
        true
    }

    /// Processes every event up to and including `deadline`, then sets the clock to `deadline`.
    pub fn run_until(&mut self, deadline: Instant) {
        while self.next_event_time().is_some_and(|t| t <= deadline) {
            self.step();
        }
        self.now = self.now.max(deadline);
    }

    /// [`run_until`](Self::run_until) `now + d`.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Steps while `cond(self)` holds and the next event is no later than `max_time`. Returns
    /// `true` if it stopped because `cond` became false; otherwise (time limit reached or no
    /// events left) the clock is set to `max_time` and it returns `false`.
    pub fn run_while(&mut self, mut cond: impl FnMut(&mut Simulator) -> bool, max_time: Instant) -> bool {
        loop {
            if !cond(self) {
                return true;
            }
            if self.next_event_time().is_none_or(|t| t > max_time) {
                self.now = self.now.max(max_time);
                return false;
            }
            self.step();
        }
    }

    fn record(&mut self, kind: u64, link: u64, pkt: &Datagram) {
        // Time, link, kind and size only: hashing every payload byte would cost a pass over
        // all simulated data, and the timings already tell runs apart. (The payloads repeat
        // too: the simulator's TLS draws its randomness from the run's seed.)
        let t = &mut self.trace;
        t.write_u64(kind | link << 8);
        t.write_u64(self.now.as_nanos());
        t.write_u64(pkt.data.len() as u64);
    }

    fn record_drop(&mut self, reason: DropReason, link: LinkId, pkt: &Datagram) {
        let kind = 16 + reason as u64;
        self.record(kind, u64::from(link.0), pkt);
    }

    /// Drains the node's transmits and re-arms its timer.
    fn poll(&mut self, node: u32) {
        let now = self.now;
        while let Some(d) = self.nodes[node as usize].node.poll_transmit(now) {
            self.send(d);
        }
        let slot = &mut self.nodes[node as usize];
        let t = slot.node.poll_timeout();
        if t != slot.armed {
            slot.armed = t;
            slot.generation += 1;
            let generation = slot.generation;
            if let Some(t) = t {
                self.push(t, Event::Timer { node, generation });
            }
        }
    }

    fn send(&mut self, mut pkt: Datagram) {
        let now = self.now;
        if let Some(src) = self.nats.iter_mut().find_map(|n| n.outbound(now, pkt.src, pkt.data.len())) {
            pkt.src = src;
        }
        match self.route_ids.get(&(pkt.src, pkt.dst)) {
            Some(&route) => self.forward(route, 0, pkt),
            None => {
                self.stats.unroutable += 1;
                self.record(TRACE_NO_ROUTE, 0, &pkt);
            }
        }
    }

    /// Offers `pkt` to hop `hop` of `route`, or hands it to the destination after the last hop.
    fn forward(&mut self, route: u32, hop: u32, pkt: Datagram) {
        let Some(&link) = self.routes[route as usize].get(hop as usize) else {
            return self.deliver(pkt);
        };
        let l = &mut self.links[link.index()];
        match l.offer(self.now, pkt.data.len()) {
            Fate::Drop(reason) => self.record_drop(reason, link, &pkt),
            Fate::Deliver { at, duplicate } => {
                let epoch = l.epoch();
                if duplicate {
                    let copy = pkt.clone();
                    self.push(at, Event::Arrive { route, hop, epoch, pkt });
                    self.push(at, Event::Arrive { route, hop, epoch, pkt: copy });
                } else {
                    self.push(at, Event::Arrive { route, hop, epoch, pkt });
                }
            }
        }
    }

    fn arrive(&mut self, route: u32, hop: u32, epoch: u32, pkt: Datagram) {
        let link = self.routes[route as usize][hop as usize];
        if !self.links[link.index()].arrive(epoch, pkt.data.len()) {
            return self.record_drop(DropReason::Down, link, &pkt);
        }
        self.record(TRACE_DELIVER, u64::from(link.0), &pkt);
        self.forward(route, hop + 1, pkt);
    }

    fn deliver(&mut self, mut pkt: Datagram) {
        let now = self.now;
        for n in &mut self.nats {
            match n.inbound(now, pkt.dst, pkt.data.len()) {
                Inbound::NotMine => continue,
                Inbound::To(inside) => pkt.dst = inside,
                Inbound::Stale => {
                    self.stats.nat_dropped += 1;
                    return self.record(TRACE_NAT_DROP, 0, &pkt);
                }
            }
            break;
        }
        let Some(&node) = self.owners.get(&pkt.dst) else {
            self.stats.no_host += 1;
            return self.record(TRACE_NO_HOST, 0, &pkt);
        };
        self.stats.delivered += 1;
        self.nodes[node as usize].node.handle_datagram_in_place(self.now, pkt.src, pkt.dst, &mut pkt.data);
        self.poll(node);
    }
}
