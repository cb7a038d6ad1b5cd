//! An endpoint with an application on top, as every runtime drives it: the endpoint takes the
//! datagrams, timers and transmits; the application works after each round. Implementing
//! [`EndpointApp`] makes a type a [`Driver`] of the single-thread loop and an
//! [`EndpointDriver`] of the runtime with a thread per path and of the shard runtime (the
//! CLI's runner and the API's driver both are).

use std::net::SocketAddr;
use std::ops::ControlFlow;

use mpq_proto::endpoint::Endpoint;
use mpq_proto::Instant;

use crate::path_threads::EndpointDriver;
use crate::{Driver, Transmit};

/// An endpoint and the application above it.
pub trait EndpointApp: Send {
    /// The QUIC endpoint.
    fn endpoint(&mut self) -> &mut Endpoint;
    /// The application's work after each round of I/O; `Break` ends the run.
    fn on_wake(&mut self, now: Instant) -> ControlFlow<()>;
    /// When the application wants [`EndpointApp::on_wake`] again without I/O.
    fn app_timeout(&mut self) -> Option<Instant> {
        None
    }
    /// See [`EndpointDriver::on_runtime_failure`].
    fn on_runtime_failure(&mut self) {}
    /// See [`Driver::take_wakes`].
    fn take_wakes(&mut self) -> Vec<std::task::Waker> {
        Vec::new()
    }
}

impl<T: EndpointApp> Driver for T {
    fn handle_datagram(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        data: &mut [u8],
    ) {
        self.endpoint().handle_datagram(now, local, remote, ecn, data);
    }

    fn handle_datagrams(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<u8>,
        datagrams: &mut [&mut [u8]],
    ) {
        self.endpoint().handle_datagrams(now, local, remote, ecn, datagrams);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint().handle_timeout(now);
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        [self.endpoint().poll_timeout(), self.app_timeout()].into_iter().flatten().min()
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.endpoint().poll_transmit(now, buf)
    }

    fn on_wake(&mut self, now: Instant) -> ControlFlow<()> {
        EndpointApp::on_wake(self, now)
    }

    fn take_wakes(&mut self) -> Vec<std::task::Waker> {
        EndpointApp::take_wakes(self)
    }
}

impl<T: EndpointApp> EndpointDriver for T {
    fn endpoint(&mut self) -> &mut Endpoint {
        EndpointApp::endpoint(self)
    }

    fn on_runtime_failure(&mut self) {
        EndpointApp::on_runtime_failure(self);
    }
}
