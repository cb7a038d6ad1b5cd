//! How many threads the per-path runtime gives the paths.

/// How many threads the paths of an endpoint's connections get ([`super::PathThreads::path_thread_limit`]).
/// A new path gets a thread of its own while there are fewer, else joins the thread that
/// drives the fewest paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathThreadLimit {
    /// As many as the CPUs the runtime may use (the pinned ones, else those the process
    /// may run on): a thread per path up to there. The default: beyond, every path's
    /// batches wait for a CPU and each switch costs the others' cached buffers (over 8
    /// veth paths on 2 cores, a thread per path sent at 0.74x the single-thread runtime's
    /// goodput with 1.31x its CPU per byte; two threads at 0.95x and 1.06x).
    #[default]
    Cores,
    /// At most this many (at least 1).
    Most(usize),
    /// A thread for every path, however many.
    PerPath,
}

impl PathThreadLimit {
    /// The most path threads on `cores` CPUs (`None`: no limit).
    pub fn resolve(self, cores: usize) -> Option<usize> {
        match self {
            PathThreadLimit::Cores => Some(cores.max(1)),
            PathThreadLimit::Most(n) => Some(n.max(1)),
            PathThreadLimit::PerPath => None,
        }
    }
}

impl std::str::FromStr for PathThreadLimit {
    type Err = String;

    /// `cores`, `paths` (a thread per path) or a number of threads (at least 1).
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cores" => Ok(PathThreadLimit::Cores),
            "paths" => Ok(PathThreadLimit::PerPath),
            n => match n.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(PathThreadLimit::Most(n)),
                _ => Err(format!("'{s}' is not a number of path threads: give 1 or more, 'cores' or 'paths'")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_from_the_command_line_and_resolve_against_the_cores() {
        assert_eq!("cores".parse(), Ok(PathThreadLimit::Cores));
        assert_eq!("paths".parse(), Ok(PathThreadLimit::PerPath));
        assert_eq!("3".parse(), Ok(PathThreadLimit::Most(3)));
        for bad in ["0", "-1", "", "all", "2.5"] {
            let e = bad.parse::<PathThreadLimit>().unwrap_err();
            assert!(e.contains("'cores' or 'paths'"), "{bad}: {e}");
        }
        assert_eq!(PathThreadLimit::default().resolve(8), Some(8));
        assert_eq!(PathThreadLimit::Cores.resolve(0), Some(1), "at least one thread");
        assert_eq!(PathThreadLimit::Most(3).resolve(8), Some(3));
        assert_eq!(PathThreadLimit::Most(0).resolve(8), Some(1));
        assert_eq!(PathThreadLimit::PerPath.resolve(2), None);
    }
}
