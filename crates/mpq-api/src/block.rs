//! Blocking calls: any future of the API driven on the calling thread, which sleeps until the
//! runtime wakes it.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives a future to completion on the calling thread: `conn.open_uni().wait()`.
pub trait Wait: Future + Sized {
    /// Blocks the calling thread until the future completes. Do not call it from inside an
    /// async executor's task (it would block the executor's thread).
    fn wait(self) -> Self::Output {
        let mut f = pin!(self);
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            // A wake before the park leaves a token: park returns at once.
            std::thread::park();
        }
    }
}

impl<F: Future> Wait for F {}
