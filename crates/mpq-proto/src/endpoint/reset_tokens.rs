//! Stateless reset tokens of the peer connection IDs our connections use, so that a reset,
//! which arrives with a destination CID we cannot route, still finds its connection
//! (RFC 9000 §10.3.1).

use std::collections::HashMap;

/// A stateless reset token (RFC 9000 §10.3).
pub(crate) type Token = [u8; crate::packet::header::RESET_TOKEN_LEN];

/// Token -> connection index, for the tokens of peer CIDs in use.
///
/// The lookup hashes the token with std's randomly keyed SipHash, so its timing says nothing
/// an attacker could use to guess a token byte by byte; the connection then compares the
/// token in constant time before it believes the reset.
#[derive(Debug, Default)]
pub(crate) struct ResetTokens {
    by_token: HashMap<Token, usize>,
    /// What each connection has registered, to replace or remove exactly that.
    by_conn: HashMap<usize, Vec<Token>>,
}

impl ResetTokens {
    /// Registers `tokens` as connection `idx`'s set, replacing what it had.
    pub fn set(&mut self, idx: usize, tokens: Vec<Token>) {
        if self.by_conn.get(&idx) == Some(&tokens) {
            return;
        }
        self.remove(idx);
        if tokens.is_empty() {
            return;
        }
        for t in &tokens {
            self.by_token.insert(*t, idx);
        }
        self.by_conn.insert(idx, tokens);
    }

    /// Forgets connection `idx`'s tokens.
    pub fn remove(&mut self, idx: usize) {
        for t in self.by_conn.remove(&idx).unwrap_or_default() {
            if self.by_token.get(&t) == Some(&idx) {
                self.by_token.remove(&t);
            }
        }
    }

    /// The connection whose peer issued the token that ends `datagram`, if any.
    pub fn lookup(&self, datagram: &[u8]) -> Option<usize> {
        let len = datagram.len();
        if len < crate::packet::header::MIN_STATELESS_RESET_LEN {
            return None;
        }
        let token: Token = datagram[len - crate::packet::header::RESET_TOKEN_LEN..].try_into().ok()?;
        self.by_token.get(&token).copied()
    }

    /// Registered tokens (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_token.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram_ending_in(token: Token) -> Vec<u8> {
        let mut d = vec![0x40; 30];
        d.extend_from_slice(&token);
        d
    }

    #[test]
    fn lookup_finds_the_connection_and_forgets_replaced_tokens() {
        let mut t = ResetTokens::default();
        t.set(3, vec![[1; 16], [2; 16]]);
        assert_eq!(t.lookup(&datagram_ending_in([2; 16])), Some(3));
        t.set(3, vec![[2; 16]]);
        assert_eq!(t.lookup(&datagram_ending_in([1; 16])), None);
        t.set(4, vec![[9; 16]]);
        t.remove(3);
        assert_eq!(t.lookup(&datagram_ending_in([2; 16])), None);
        assert_eq!(t.lookup(&datagram_ending_in([9; 16])), Some(4));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn too_short_to_be_a_reset() {
        let mut t = ResetTokens::default();
        t.set(0, vec![[7; 16]]);
        assert_eq!(t.lookup(&[7; 16]), None);
    }
}
