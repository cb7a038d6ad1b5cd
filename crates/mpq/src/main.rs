//! The `mpq` command-line tool.
fn main() {}
