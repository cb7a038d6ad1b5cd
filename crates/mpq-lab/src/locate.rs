//! Finds the line of a key path (`factors.scheduler[1]`) in a YAML text, so that errors found
//! after parsing (checks that span several keys) can point at the line like parse errors do.
//!
//! Block-style YAML is followed key by key and item by item; a value written in flow style
//! (`[a, b]`, `{min: .., max: ..}`) is located at the line of its key.

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Splits `a.b[2].c` into segments.
pub fn parse_path(path: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key.to_owned()));
        }
        while let Some(end) = rest.find(']') {
            if let Ok(n) = rest[1..end].parse() {
                out.push(Seg::Index(n));
            }
            rest = &rest[end + 1..];
        }
    }
    out
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#') && t != "---"
}

/// Where the content of a line starts once a leading `- ` (sequence item) is skipped.
fn after_dash(line: &str) -> (usize, &str) {
    let mut col = indent(line);
    let mut rest = line.trim_start();
    while let Some(r) = rest.strip_prefix("- ") {
        col += 2 + (r.len() - r.trim_start().len());
        rest = r.trim_start();
    }
    (col, rest)
}

fn key_of(rest: &str) -> Option<&str> {
    let (k, _) = rest.split_once(':')?;
    Some(k.trim().trim_matches(|c| c == '"' || c == '\''))
}

/// The 1-based line of `path` in `text`, or `None` if it is not there.
pub fn locate(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    // The current node: its line (`None`: the document) and how its children are laid out.
    let mut node: Option<(usize, Parent)> = None;
    for seg in parse_path(path) {
        if let Some((i, Parent::Key(_))) = node {
            // A flow-style value on the key's own line: the rest is on that line.
            let (_, rest) = after_dash(lines[i]);
            let value = rest.split_once(':').map_or("", |(_, v)| v.trim());
            if value.starts_with('[') || value.starts_with('{') {
                return Some(i + 1);
            }
        }
        // The lines of the node's block, with the column their content starts at.
        let block = lines.iter().enumerate().skip(node.map_or(0, |(i, _)| i)).filter(|(_, l)| is_content(l));
        let mut members = Vec::new();
        for (i, l) in block {
            let first = node.is_some_and(|(n, _)| n == i);
            let inside = match node {
                None => true,
                Some((_, Parent::Key(col))) => {
                    !first && (indent(l) > col || indent(l) == col && l.trim_start().starts_with('-'))
                }
                Some((_, Parent::Item(col))) => first || indent(l) > col,
            };
            if !inside {
                if first {
                    continue;
                }
                break;
            }
            members.push(i);
        }
        let hit = match seg {
            Seg::Key(k) => {
                // A member's key and its column; keys of this mapping share the first's column.
                let entry = |i: usize| -> Option<(usize, &str)> {
                    match node {
                        Some((n, Parent::Item(_))) if n == i => Some(after_dash(lines[i])),
                        _ if lines[i].trim_start().starts_with('-') => None,
                        _ => Some((indent(lines[i]), lines[i].trim_start())),
                    }
                };
                let col = members.iter().find_map(|&i| entry(i))?.0;
                members.iter().find_map(|&i| {
                    let (c, rest) = entry(i)?;
                    (c == col && key_of(rest) == Some(k.as_str())).then_some((i, Parent::Key(c)))
                })
            }
            Seg::Index(n) => {
                let items: Vec<usize> =
                    members.iter().copied().filter(|&i| lines[i].trim_start().starts_with('-')).collect();
                let col = items.first().map(|&i| indent(lines[i]))?;
                items.into_iter().filter(|&i| indent(lines[i]) == col).nth(n).map(|i| (i, Parent::Item(col)))
            }
        };
        node = Some(hit?);
    }
    node.map(|(i, _)| i + 1)
}

/// How the children of a located node are laid out.
#[derive(Debug, Clone, Copy)]
enum Parent {
    /// A key at this column: children are indented more (or are `- ` items at the same column).
    Key(usize),
    /// A sequence item whose dash is at this column: children are on its line and below.
    Item(usize),
}

/// Like [`locate`], falling back to the nearest ancestor's line.
pub fn locate_or_parent(text: &str, path: &str) -> Option<usize> {
    let mut p = path.to_owned();
    loop {
        if let Some(l) = locate(text, &p) {
            return Some(l);
        }
        let cut = p.rfind(['.', '['])?;
        p.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
name: x
# a comment
topology:
  paths:
    - rate: 10mbit
      rtt: 20ms
    - rate: {min: 1mbit, max: 2mbit}
      rtt: 40ms
      queue: 100ms
factors:
  scheduler: [minrtt, ecf]
  cc:
    - olia
    - lia
design:
  type: wsp
";

    #[test]
    fn block_keys_and_items() {
        assert_eq!(locate(DOC, "name"), Some(1));
        assert_eq!(locate(DOC, "topology.paths"), Some(4));
        assert_eq!(locate(DOC, "topology.paths[0]"), Some(5));
        assert_eq!(locate(DOC, "topology.paths[0].rtt"), Some(6));
        assert_eq!(locate(DOC, "topology.paths[1].queue"), Some(9));
        assert_eq!(locate(DOC, "factors.cc[1]"), Some(14));
        assert_eq!(locate(DOC, "design.type"), Some(16));
    }

    #[test]
    fn flow_values_point_at_their_key() {
        assert_eq!(locate(DOC, "factors.scheduler[1]"), Some(11));
        assert_eq!(locate(DOC, "topology.paths[1].rate.min"), Some(7));
    }

    #[test]
    fn missing_keys_fall_back_to_the_parent() {
        assert_eq!(locate(DOC, "topology.paths[0].queue"), None);
        assert_eq!(locate_or_parent(DOC, "topology.paths[0].queue"), Some(5));
        assert_eq!(locate_or_parent(DOC, "design.points"), Some(15));
        assert_eq!(locate(DOC, "workload"), None);
    }

    #[test]
    fn paths_split() {
        assert_eq!(
            parse_path("a.b[2].c"),
            vec![Seg::Key("a".into()), Seg::Key("b".into()), Seg::Index(2), Seg::Key("c".into())]
        );
    }
}
