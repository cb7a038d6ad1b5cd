//! UDP I/O through quinn-udp (GSO/GRO) and event loops that drive the protocol core.
