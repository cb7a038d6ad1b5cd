//! Rows as CSV: every JSON row is flattened (`links.0`, `path_share.1`, nested objects
//! `a.b`), columns in the order they first appear (the order of [`crate::metrics::Row`]'s
//! fields), fields quoted when needed (RFC 4180).

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// A JSON object with its keys in document order.
struct Ordered(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), v, out);
            }
        }
        Value::Null => out.push((prefix.to_owned(), String::new())),
        Value::String(s) => out.push((prefix.to_owned(), s.clone())),
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}

/// One JSON object (a line of results) as flat (column, value) pairs, in document order.
pub fn flat_fields(json_line: &str) -> Result<Vec<(String, String)>, serde_json::Error> {
    let Ordered(fields) = serde_json::from_str(json_line)?;
    let mut out = Vec::new();
    for (k, v) in &fields {
        flatten(k, v, &mut out);
    }
    Ok(out)
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// A CSV table of JSON lines: header = every column seen, first-appearance order; a row
/// without a column leaves it empty.
pub fn to_csv<'a>(json_lines: impl IntoIterator<Item = &'a str>) -> Result<String, serde_json::Error> {
    let rows: Vec<Vec<(String, String)>> = json_lines.into_iter().map(flat_fields).collect::<Result<_, _>>()?;
    let mut columns: Vec<&str> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in &rows {
        for (k, _) in r {
            if seen.insert(k.as_str()) {
                // A new element of a list (`links.2`) goes after its siblings.
                let base = k.rsplit_once('.').map(|(b, _)| b);
                let last_sibling =
                    base.and_then(|b| columns.iter().rposition(|c| c.rsplit_once('.').map(|(cb, _)| cb) == Some(b)));
                match last_sibling {
                    Some(i) => columns.insert(i + 1, k),
                    None => columns.push(k),
                }
            }
        }
    }
    let mut out = columns.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in &rows {
        let m: std::collections::HashMap<&str, &str> = r.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        out += &columns.iter().map(|c| quote(m.get(c).copied().unwrap_or(""))).collect::<Vec<_>>().join(",");
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_in_document_order() {
        let f = flat_fields(r#"{"z": 1, "a": [2, 3], "m": {"y": null, "b": "x,y"}, "t": true}"#).unwrap();
        let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["z", "a.0", "a.1", "m.y", "m.b", "t"]);
        assert_eq!(f[4].1, "x,y");
        assert_eq!(f[3].1, "");
    }

    #[test]
    fn table_unions_columns_and_quotes() {
        let csv = to_csv([r#"{"id": "a", "v": 1}"#, r#"{"id": "b \"q\"", "w": "1,2"}"#]).unwrap();
        assert_eq!(csv, "id,v,w\na,1,\n\"b \"\"q\"\"\",,\"1,2\"\n");
        // Longer lists in later rows keep their columns together.
        let csv = to_csv([r#"{"p": [1], "z": 0}"#, r#"{"p": [2, 3], "z": 1}"#]).unwrap();
        assert_eq!(csv, "p.0,p.1,z\n1,,0\n2,3,1\n");
    }
}
