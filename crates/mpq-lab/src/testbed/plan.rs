//! The testbed's names, address plan and the `ip` commands that build it (pure: nothing
//! here touches the system).
//!
//! Three namespaces, `mpqlab-NAME-client`, `-server` and `-router`. Path `i` (0-based,
//! `k = i + 1`) has its own subnets: the client's `10.k.1.0/24` (client `10.k.1.2`, router
//! `10.k.1.1`) and the server's `10.k.2.0/24` (server `10.k.2.2`, router `10.k.2.1`). The
//! client and the server see it as interface `pathI`; the router as veths `cI` and `sI`
//! and the TUN device `tunI` the emulator reads.
//!
//! A path is its client address: the client routes by source (`from 10.k.1.2` goes out of
//! `pathI`, whatever the destination), the server by destination (`10.k.1.0/24` via
//! `pathI`), so a connection between client address k and any server address crosses path
//! k both ways. In the router, `ip rule iif cI|sI lookup 100+i` sends everything arriving
//! from path i's veths to `tunI` (table `100+i`: `default dev tunI`, and a blackhole
//! behind it so that nothing bypasses the emulator if the device goes); what the emulator
//! writes back into `tunI` is forwarded by the main table to the other veth.
//!
//! With a shared bottleneck, every path's packets also cross one more link the emulator
//! models (client to server after the path's own, server to client before it), and one more
//! path, the competitor's, is built after the others like them (`10.(n+1).x`, `pathN`, `tunN`
//! for `n` paths) with no limit of its own: traffic between its two addresses (e.g. a
//! competing single-path download) crosses only the bottleneck. It is no MPTCP endpoint.
//!
//! With MPTCP (when the kernel has it), every client address is an MPTCP `subflow` endpoint
//! of the client namespace and both ends allow a subflow per extra path: an MPTCP
//! connection from any client address then opens a subflow from each other one, i.e. one
//! over every path (the in-kernel path manager; endpoints and limits are per namespace).

use std::net::Ipv4Addr;

/// The prefix of every namespace the testbed creates.
pub const PREFIX: &str = "mpqlab";
/// The most paths a testbed has (the subnets `10.1.x` to `10.32.x`, tables 100 to 131).
pub const MAX_PATHS: usize = 32;
/// The routing table of path 0; path i uses `TABLE_BASE + i`.
pub const TABLE_BASE: u32 = 100;
/// The TUN devices' MTU: above any path's, so that the router never fragments on its way
/// into the emulator (the veths carry the path's MTU).
pub const TUN_MTU: usize = 65535;
/// The TUN devices' transmit queue (packets waiting for the emulator to read them). Deep,
/// so that the link model, not the kernel, decides drops; packets dropped here show up in
/// the emulator's `kernel_drops`.
pub const TUN_TXQUEUELEN: u32 = 10_000;
/// The most subflows (and accepted ADD_ADDRs) the kernel's path manager allows a connection
/// (`MPTCP_PM_ADDR_MAX`).
pub const MPTCP_MAX_SUBFLOWS: usize = 8;
/// The competitor path's own link (`--link` form): no rate limit, no delay, so that only
/// the bottleneck shapes it (the simulator's competitor access link).
pub const COMPETITOR_LINK: &str = "inf/0ms";

/// A testbed's name and the namespaces derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The name (`--name`).
    pub name: String,
}

impl Names {
    /// Checks `name`: 1 to 24 characters of `a-z`, `0-9` and `-` (it becomes part of
    /// namespace and file names).
    pub fn new(name: &str) -> Result<Self, String> {
        let ok = !name.is_empty()
            && name.len() <= 24
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return Err(format!(
                "testbed name {name:?}: use 1 to 24 characters of a-z, 0-9 and '-' (it names namespaces and files)"
            ));
        }
        Ok(Names { name: name.to_owned() })
    }

    /// The client's namespace.
    pub fn client_ns(&self) -> String {
        format!("{PREFIX}-{}-client", self.name)
    }

    /// The server's namespace.
    pub fn server_ns(&self) -> String {
        format!("{PREFIX}-{}-server", self.name)
    }

    /// The router's namespace (veths, TUN devices, the emulator).
    pub fn router_ns(&self) -> String {
        format!("{PREFIX}-{}-router", self.name)
    }

    /// All three, in creation order.
    pub fn all_ns(&self) -> [String; 3] {
        [self.client_ns(), self.server_ns(), self.router_ns()]
    }

    /// The testbed name a namespace of ours belongs to (`mpqlab-NAME-client` → `NAME`).
    pub fn of_namespace(ns: &str) -> Option<String> {
        let rest = ns.strip_prefix(PREFIX)?.strip_prefix('-')?;
        ["-client", "-server", "-router"].iter().find_map(|s| rest.strip_suffix(s)).map(str::to_owned)
    }
}

/// One path's addresses and interface names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPlan {
    /// 0-based index.
    pub index: usize,
    /// The client's address.
    pub client: Ipv4Addr,
    /// The server's address.
    pub server: Ipv4Addr,
    /// The router's address on the client's subnet.
    pub router_client: Ipv4Addr,
    /// The router's address on the server's subnet.
    pub router_server: Ipv4Addr,
    /// The MTU of the path's veths.
    pub mtu: usize,
}

impl PathPlan {
    /// Path `index` (below [`MAX_PATHS`]) with interfaces of MTU `mtu`.
    pub fn new(index: usize, mtu: usize) -> Self {
        let k = (index + 1) as u8;
        PathPlan {
            index,
            client: Ipv4Addr::new(10, k, 1, 2),
            server: Ipv4Addr::new(10, k, 2, 2),
            router_client: Ipv4Addr::new(10, k, 1, 1),
            router_server: Ipv4Addr::new(10, k, 2, 1),
            mtu,
        }
    }

    /// The interface name of the path in the client and in the server namespace.
    pub fn endpoint_if(&self) -> String {
        format!("path{}", self.index)
    }

    /// The router's veth towards the client.
    pub fn router_client_if(&self) -> String {
        format!("c{}", self.index)
    }

    /// The router's veth towards the server.
    pub fn router_server_if(&self) -> String {
        format!("s{}", self.index)
    }

    /// The TUN device of the path, in the router namespace.
    pub fn tun(&self) -> String {
        format!("tun{}", self.index)
    }

    /// The router's (and the client's) routing table for the path.
    pub fn table(&self) -> u32 {
        TABLE_BASE + self.index as u32
    }

    /// The client's subnet as (network, prefix length): packets to it travel server to client.
    pub fn client_subnet(&self) -> (Ipv4Addr, u8) {
        let o = self.client.octets();
        (Ipv4Addr::new(o[0], o[1], o[2], 0), 24)
    }

    fn server_net(&self) -> String {
        let o = self.server.octets();
        format!("{}.{}.{}.0/24", o[0], o[1], o[2])
    }

    fn client_net(&self) -> String {
        let (n, l) = self.client_subnet();
        format!("{n}/{l}")
    }
}

/// One step of building a testbed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `ip ARGS...`.
    Ip(Vec<String>),
    /// Write `value` to `/proc/sys/KEY` (dots for slashes) inside namespace `ns`.
    Sysctl {
        /// The namespace.
        ns: String,
        /// The key, e.g. `net.ipv4.ip_forward`.
        key: String,
        /// The value.
        value: String,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Ip(args) => write!(f, "ip {}", args.join(" ")),
            Step::Sysctl { ns, key, value } => write!(f, "ip netns exec {ns} sysctl {key}={value}"),
        }
    }
}

/// A whole testbed: names and paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Its names.
    pub names: Names,
    /// Its paths.
    pub paths: Vec<PathPlan>,
    /// Configure MPTCP's path manager in the client and server namespaces (the kernel must
    /// have MPTCP: `ip mptcp` fails otherwise).
    pub mptcp: bool,
    /// The competitor's path through a shared bottleneck, if the testbed has one.
    pub competitor: Option<PathPlan>,
}

impl Plan {
    /// A testbed named `names` with one path per MTU in `mtus` (1 to [`MAX_PATHS`]).
    pub fn new(names: Names, mtus: &[usize]) -> Result<Self, String> {
        if mtus.is_empty() || mtus.len() > MAX_PATHS {
            return Err(format!("a testbed has 1 to {MAX_PATHS} paths (one --link each), not {}", mtus.len()));
        }
        let paths = mtus.iter().enumerate().map(|(i, &m)| PathPlan::new(i, m)).collect();
        Ok(Plan { names, paths, mptcp: false, competitor: None })
    }

    /// Adds the competitor's path of a shared bottleneck (with the paths' largest MTU); the
    /// paths and it together are at most [`MAX_PATHS`].
    pub fn with_competitor(mut self) -> Result<Self, String> {
        if self.paths.len() >= MAX_PATHS {
            return Err(format!(
                "a testbed with a shared bottleneck has 1 to {} paths (the competitor's is one more), not {}",
                MAX_PATHS - 1,
                self.paths.len()
            ));
        }
        let mtu = self.paths.iter().map(|p| p.mtu).max().unwrap_or(super::spec::DEFAULT_MTU);
        self.competitor = Some(PathPlan::new(self.paths.len(), mtu));
        Ok(self)
    }

    /// Every step that builds the testbed, in order. Namespaces first (removing them
    /// removes everything else, TUN devices included).
    pub fn steps(&self) -> Vec<Step> {
        let (c, s, r) = (self.names.client_ns(), self.names.server_ns(), self.names.router_ns());
        let mut v = Vec::new();
        let ip =
            |v: &mut Vec<Step>, line: String| v.push(Step::Ip(line.split_whitespace().map(str::to_owned).collect()));
        let sysctl = |v: &mut Vec<Step>, ns: &str, key: &str, value: &str| {
            v.push(Step::Sysctl { ns: ns.to_owned(), key: key.to_owned(), value: value.to_owned() })
        };
        for ns in [&c, &s, &r] {
            ip(&mut v, format!("netns add {ns}"));
        }
        for ns in [&c, &s, &r] {
            ip(&mut v, format!("-n {ns} link set lo up"));
            // Loose reverse-path checks: a connection between client address k and server
            // address j != k enters and leaves the namespaces on different interfaces. Set
            // before the interfaces exist, which take `default`.
            sysctl(&mut v, ns, "net.ipv4.conf.all.rp_filter", "0");
            sysctl(&mut v, ns, "net.ipv4.conf.default.rp_filter", "0");
        }
        sysctl(&mut v, &r, "net.ipv4.ip_forward", "1");
        for p in self.paths.iter().chain(&self.competitor) {
            let (e, rc, rs, tun, t, mtu) =
                (p.endpoint_if(), p.router_client_if(), p.router_server_if(), p.tun(), p.table(), p.mtu);
            ip(&mut v, format!("-n {r} link add {rc} mtu {mtu} type veth peer name {e} netns {c} mtu {mtu}"));
            ip(&mut v, format!("-n {r} link add {rs} mtu {mtu} type veth peer name {e} netns {s} mtu {mtu}"));
            ip(&mut v, format!("-n {r} addr add {}/24 dev {rc}", p.router_client));
            ip(&mut v, format!("-n {r} addr add {}/24 dev {rs}", p.router_server));
            ip(&mut v, format!("-n {c} addr add {}/24 dev {e}", p.client));
            ip(&mut v, format!("-n {s} addr add {}/24 dev {e}", p.server));
            ip(&mut v, format!("-n {r} tuntap add dev {tun} mode tun"));
            ip(&mut v, format!("-n {r} link set {tun} mtu {TUN_MTU} txqueuelen {TUN_TXQUEUELEN}"));
            for (ns, dev) in [(&r, &rc), (&r, &rs), (&r, &tun), (&c, &e), (&s, &e)] {
                ip(&mut v, format!("-n {ns} link set {dev} up"));
            }
            ip(&mut v, format!("-n {r} route add default dev {tun} table {t}"));
            ip(&mut v, format!("-n {r} route add blackhole default metric 1000 table {t}"));
            ip(&mut v, format!("-n {r} rule add iif {rc} lookup {t} pref 100"));
            ip(&mut v, format!("-n {r} rule add iif {rs} lookup {t} pref 100"));
            ip(&mut v, format!("-n {c} route add {} via {} dev {e}", p.server_net(), p.router_client));
            ip(&mut v, format!("-n {c} route add default via {} dev {e} table {t}", p.router_client));
            ip(&mut v, format!("-n {c} rule add from {} lookup {t} pref 100", p.client));
            ip(&mut v, format!("-n {s} route add {} via {} dev {e}", p.client_net(), p.router_server));
        }
        if self.mptcp {
            // One subflow per extra path. The server needs the limits too: it refuses
            // joins beyond its own `subflows` limit.
            let n = (self.paths.len() - 1).min(MPTCP_MAX_SUBFLOWS);
            for ns in [&c, &s] {
                sysctl(&mut v, ns, "net.mptcp.enabled", "1");
                ip(&mut v, format!("-n {ns} mptcp limits set subflows {n} add_addr_accepted {n}"));
            }
            // Every client address, the first too: the path manager skips the address of
            // the connection's first subflow, so a connection from any path opens
            // subflows over all the others.
            for p in &self.paths {
                ip(&mut v, format!("-n {c} mptcp endpoint add {} dev {} subflow", p.client, p.endpoint_if()));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let n = Names::new("tb-1").unwrap();
        assert_eq!(n.all_ns(), ["mpqlab-tb-1-client", "mpqlab-tb-1-server", "mpqlab-tb-1-router"]);
        assert_eq!(Names::of_namespace("mpqlab-tb-1-router").as_deref(), Some("tb-1"));
        assert_eq!(Names::of_namespace("mpqlab-a-server-client").as_deref(), Some("a-server"));
        assert_eq!(Names::of_namespace("other-tb-client"), None);
        assert_eq!(Names::of_namespace("mpqlab-tb"), None);
        for bad in ["", "Upper", "a b", "a/b", "x".repeat(25).as_str()] {
            assert!(Names::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn address_plan_has_a_subnet_pair_per_path() {
        let p = PathPlan::new(1, 1400);
        assert_eq!(p.client, Ipv4Addr::new(10, 2, 1, 2));
        assert_eq!(p.server, Ipv4Addr::new(10, 2, 2, 2));
        assert_eq!((p.router_client, p.router_server), (Ipv4Addr::new(10, 2, 1, 1), Ipv4Addr::new(10, 2, 2, 1)));
        assert_eq!(
            (p.endpoint_if(), p.router_client_if(), p.router_server_if(), p.tun()),
            ("path1".into(), "c1".into(), "s1".into(), "tun1".into())
        );
        assert_eq!(p.table(), 101);
        assert_eq!(p.client_subnet(), (Ipv4Addr::new(10, 2, 1, 0), 24));
        let last = PathPlan::new(MAX_PATHS - 1, 1500);
        assert_eq!(last.client, Ipv4Addr::new(10, 32, 1, 2));
    }

    #[test]
    fn path_counts_are_checked() {
        let n = Names::new("x").unwrap();
        assert!(Plan::new(n.clone(), &[]).is_err());
        assert!(Plan::new(n.clone(), &[1500; MAX_PATHS + 1]).is_err());
        assert_eq!(Plan::new(n, &[1500, 9000]).unwrap().paths[1].mtu, 9000);
    }

    #[test]
    fn steps_build_namespaces_first_and_route_each_path_through_its_tun() {
        let plan = Plan::new(Names::new("t").unwrap(), &[1500, 1280]).unwrap();
        let lines: Vec<String> = plan.steps().iter().map(ToString::to_string).collect();
        assert_eq!(lines[0], "ip netns add mpqlab-t-client");
        assert_eq!(lines[2], "ip netns add mpqlab-t-router");
        let has = |l: &str| assert!(lines.iter().any(|x| x == l), "missing {l:?} in {lines:#?}");
        has("ip netns exec mpqlab-t-router sysctl net.ipv4.ip_forward=1");
        has("ip -n mpqlab-t-router link add c1 mtu 1280 type veth peer name path1 netns mpqlab-t-client mtu 1280");
        has("ip -n mpqlab-t-router rule add iif s1 lookup 101 pref 100");
        has("ip -n mpqlab-t-router route add default dev tun1 table 101");
        has("ip -n mpqlab-t-router route add blackhole default metric 1000 table 101");
        has("ip -n mpqlab-t-client rule add from 10.2.1.2 lookup 101 pref 100");
        has("ip -n mpqlab-t-client route add 10.2.2.0/24 via 10.2.1.1 dev path1");
        has("ip -n mpqlab-t-server route add 10.1.1.0/24 via 10.1.2.1 dev path0");
        assert!(!lines.iter().any(|l| l.contains("mptcp")), "MPTCP configured without being asked");
        // rp_filter defaults come before any veth exists.
        let first_veth = lines.iter().position(|l| l.contains("type veth")).unwrap();
        let last_sysctl = lines.iter().rposition(|l| l.contains("rp_filter")).unwrap();
        assert!(last_sysctl < first_veth);
    }

    #[test]
    fn mptcp_makes_every_client_address_a_subflow_endpoint_with_limits_on_both_ends() {
        let mut plan = Plan::new(Names::new("m").unwrap(), &[1500, 1500, 1500]).unwrap();
        plan.mptcp = true;
        let lines: Vec<String> = plan.steps().iter().map(ToString::to_string).collect();
        let has = |l: &str| assert!(lines.iter().any(|x| x == l), "missing {l:?} in {lines:#?}");
        for ns in ["mpqlab-m-client", "mpqlab-m-server"] {
            has(&format!("ip netns exec {ns} sysctl net.mptcp.enabled=1"));
            has(&format!("ip -n {ns} mptcp limits set subflows 2 add_addr_accepted 2"));
        }
        for (i, a) in ["10.1.1.2", "10.2.1.2", "10.3.1.2"].iter().enumerate() {
            has(&format!("ip -n mpqlab-m-client mptcp endpoint add {a} dev path{i} subflow"));
        }
        assert_eq!(lines.iter().filter(|l| l.contains("mptcp endpoint")).count(), 3);
        // Endpoints name interfaces: they come after the interfaces exist.
        let last_link = lines.iter().rposition(|l| l.contains("link add")).unwrap();
        let first_ep = lines.iter().position(|l| l.contains("mptcp endpoint")).unwrap();
        assert!(first_ep > last_link);
        // The kernel's limit caps the subflows of a wide testbed.
        let mut wide = Plan::new(Names::new("w").unwrap(), &[1500; 12]).unwrap();
        wide.mptcp = true;
        let l = wide.steps().iter().map(ToString::to_string).find(|l| l.contains("limits")).unwrap();
        assert!(l.ends_with("subflows 8 add_addr_accepted 8"), "{l}");
    }

    #[test]
    fn a_competitor_path_is_built_like_the_others_but_is_no_mptcp_endpoint() {
        let mut plan = Plan::new(Names::new("b").unwrap(), &[1500, 9000]).unwrap().with_competitor().unwrap();
        plan.mptcp = true;
        let c = plan.competitor.clone().unwrap();
        assert_eq!((c.index, c.mtu, c.client), (2, 9000, Ipv4Addr::new(10, 3, 1, 2)));
        let lines: Vec<String> = plan.steps().iter().map(ToString::to_string).collect();
        let has = |l: &str| assert!(lines.iter().any(|x| x == l), "missing {l:?} in {lines:#?}");
        has("ip -n mpqlab-b-router tuntap add dev tun2 mode tun");
        has("ip -n mpqlab-b-router rule add iif c2 lookup 102 pref 100");
        has("ip -n mpqlab-b-client rule add from 10.3.1.2 lookup 102 pref 100");
        has("ip -n mpqlab-b-server route add 10.3.1.0/24 via 10.3.2.1 dev path2");
        assert!(!lines.iter().any(|l| l.contains("mptcp endpoint add 10.3.1.2")), "{lines:#?}");
        // One subflow per extra path of the connection's, the competitor's not counted.
        has("ip -n mpqlab-b-client mptcp limits set subflows 1 add_addr_accepted 1");
        let full = Plan::new(Names::new("f").unwrap(), &[1500; MAX_PATHS]).unwrap();
        assert!(full.with_competitor().is_err());
    }
}
