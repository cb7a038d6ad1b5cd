//! Deterministic discrete-event network simulator (virtual time, seeded RNG).
