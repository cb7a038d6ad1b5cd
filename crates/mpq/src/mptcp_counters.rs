//! The kernel's MPTCP counters (`MPTcpExt` in `/proc/net/netstat`, what `nstat -az
//! MPTcpExt*` shows), read before and after a `--transport mptcp-tls` run to tell how many
//! subflows joined. The file is read directly rather than through `nstat`, which need not
//! be installed. The counters belong to the network namespace of the reading process, so
//! other MPTCP connections of that namespace during the run count too (the testbed's
//! client namespace has only the measurement's).

use std::collections::BTreeMap;

/// Where the counters are: `/proc/net` is the reading thread's network namespace's.
const NETSTAT: &str = "/proc/net/netstat";

/// A snapshot of one counter group (`MPTcpExt`): name (without the prefix) to value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters(pub BTreeMap<String, u64>);

impl Counters {
    /// The `MPTcpExt` counters now; `None` if the kernel has no MPTCP (no such line) or the
    /// file cannot be read.
    pub fn read() -> Option<Counters> {
        parse(&std::fs::read_to_string(NETSTAT).ok()?, "MPTcpExt")
    }

    /// A counter's value (0 if this kernel does not have it).
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// How much each counter grew since `before`, the counters that did not grow left out
    /// (`nstat`'s view of a run).
    pub fn since(&self, before: &Counters) -> Counters {
        Counters(
            self.0
                .iter()
                .filter_map(|(k, &v)| {
                    let d = v.saturating_sub(before.get(k));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect(),
        )
    }

    /// Subflows this side opened that joined, in a delta from [`Counters::since`]: SYN/ACKs
    /// with MP_JOIN received (`MPJoinSynAckRx`: the server took the join) less those whose
    /// HMAC failed (the client then resets the subflow). The client's count; a server's
    /// is `MPJoinAckRx`.
    pub fn joined_as_client(&self) -> u64 {
        self.get("MPJoinSynAckRx").saturating_sub(self.get("MPJoinSynAckHMacFailure"))
    }
}

/// Parses `/proc/net/netstat` (or `/proc/net/snmp`) text: each group is two lines, `Group:
/// name name ...` then `Group: value value ...`. Returns group `group`'s counters, `None`
/// if it is missing or its lines do not pair up.
pub fn parse(text: &str, group: &str) -> Option<Counters> {
    let prefix = format!("{group}:");
    let mut lines = text.lines().filter_map(|l| l.strip_prefix(prefix.as_str()));
    let names = lines.next()?;
    let values = lines.next()?;
    let names: Vec<&str> = names.split_whitespace().collect();
    let values: Vec<u64> = values.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
    if names.len() != values.len() || names.is_empty() {
        return None;
    }
    Some(Counters(names.into_iter().map(str::to_owned).zip(values).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shortened from a Linux 6.18 /proc/net/netstat: a group before, MPTcpExt, one after.
    const SAMPLE: &str = "TcpExt: SyncookiesSent SyncookiesRecv\nTcpExt: 3 4\n\
MPTcpExt: MPCapableSYNRX MPCapableSYNTX MPJoinSynRx MPJoinSynAckRx MPJoinSynAckHMacFailure MPJoinAckRx\n\
MPTcpExt: 0 2 0 5 1 0\nIpExt: InNoRoutes\nIpExt: 9\n";

    #[test]
    fn parses_one_group_by_name() {
        let c = parse(SAMPLE, "MPTcpExt").unwrap();
        assert_eq!(c.get("MPCapableSYNTX"), 2);
        assert_eq!(c.get("MPJoinSynAckRx"), 5);
        assert_eq!(c.0.len(), 6);
        assert_eq!(c.get("NoSuchCounter"), 0);
        // A group name that is a prefix of another's is not confused with it.
        assert_eq!(parse(SAMPLE, "TcpExt").unwrap().get("SyncookiesRecv"), 4);
        assert_eq!(parse(SAMPLE, "IpExt").unwrap().get("InNoRoutes"), 9);
    }

    #[test]
    fn missing_or_malformed_groups_are_none() {
        assert_eq!(parse(SAMPLE, "MPTcp"), None);
        assert_eq!(parse("TcpExt: A B\nTcpExt: 1 2\n", "MPTcpExt"), None);
        // Names without values, values that do not pair up, values that are not numbers.
        assert_eq!(parse("MPTcpExt: A B\n", "MPTcpExt"), None);
        assert_eq!(parse("MPTcpExt: A B\nMPTcpExt: 1\n", "MPTcpExt"), None);
        assert_eq!(parse("MPTcpExt: A B\nMPTcpExt: 1 x\n", "MPTcpExt"), None);
        assert_eq!(parse("MPTcpExt:\nMPTcpExt:\n", "MPTcpExt"), None);
    }

    #[test]
    fn joins_are_the_growth_of_synack_rx_less_hmac_failures() {
        let before = parse(SAMPLE, "MPTcpExt").unwrap();
        let after = parse(
            "MPTcpExt: MPCapableSYNTX MPJoinSynAckRx MPJoinSynAckHMacFailure MPJoinAckRx MPJoinSynTx\n\
             MPTcpExt: 3 8 1 0 4\n",
            "MPTcpExt",
        )
        .unwrap();
        let d = after.since(&before);
        // Counters that did not grow are left out; one that is new counts from 0.
        assert_eq!(
            d.0,
            [("MPCapableSYNTX", 1), ("MPJoinSynAckRx", 3), ("MPJoinSynTx", 4)]
                .map(|(k, v)| (k.to_owned(), v))
                .into_iter()
                .collect()
        );
        assert_eq!(d.joined_as_client(), 3);
        // An HMAC failure during the run is not a join.
        let failed = Counters([("MPJoinSynAckRx".to_owned(), 2), ("MPJoinSynAckHMacFailure".to_owned(), 1)].into());
        assert_eq!(failed.joined_as_client(), 1);
        // Counters never go back, but a reset of the namespace must not underflow.
        assert_eq!(before.since(&after).get("MPJoinSynAckRx"), 0);
    }

    #[test]
    fn this_kernels_file_parses_if_it_has_mptcp() {
        // Whatever the host: if the file has an MPTcpExt group it must parse and hold the
        // counters the join count uses.
        let Ok(text) = std::fs::read_to_string(NETSTAT) else { return };
        if !text.contains("MPTcpExt:") {
            return;
        }
        let c = parse(&text, "MPTcpExt").expect("MPTcpExt parses");
        assert!(c.0.contains_key("MPJoinSynAckRx") && c.0.contains_key("MPJoinSynAckHMacFailure"), "{c:?}");
    }
}
