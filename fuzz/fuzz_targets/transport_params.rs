//! Transport parameter decoding must never panic; accepted parameters round-trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpq_proto::transport_params::TransportParameters;
use mpq_proto::Side;

fuzz_target!(|data: &[u8]| {
    for side in [Side::Client, Side::Server] {
        if let Ok(tp) = TransportParameters::decode(side, data) {
            let mut out = Vec::new();
            tp.encode(&mut out);
            let again = TransportParameters::decode(side, &out).expect("re-encoded parameters decode");
            assert_eq!(format!("{tp:?}"), format!("{again:?}"));
        }
    }
});
