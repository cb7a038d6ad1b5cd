//! The few system calls the testbed needs that std does not wrap: attaching to a TUN device,
//! waiting on several descriptors with a nanosecond timeout, signals, entering a network
//! namespace, a socket's forced buffer size. Each `unsafe` block is one call with arguments
//! that live for its duration; everything else is safe code around them.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags (the union's first
/// member), padded to the kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Attaches to the existing TUN device `name` (created with `ip tuntap add`): IPv4 packets
/// without a packet-information header, non-blocking.
pub fn tun_attach(name: &str) -> io::Result<File> {
    if name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| io::Error::new(e.kind(), format!("/dev/net/tun: {e} (is the tun module loaded? modprobe tun)")))?;
    let mut req =
        IfReq { name: [0; libc::IFNAMSIZ], flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short, _pad: [0; 22] };
    for (d, s) in req.name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads (and may write back) one `struct ifreq`; `req` is one, and it
    // outlives the call. The descriptor is open for the call's duration.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut req as *mut IfReq) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("attaching to TUN device {name}: {e}")));
    }
    Ok(file)
}

/// Waits until one of `fds` is readable or `timeout` passes (`None`: no timeout), with
/// nanosecond resolution (`ppoll`; plain `poll` rounds up to milliseconds, which would
/// delay every packet). Returns which were readable; an interrupting signal returns none.
pub fn wait_readable(fds: &[RawFd], timeout: Option<Duration>, ready: &mut Vec<bool>) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` holds `pfds.len()` initialised pollfd entries and `ts_ptr` is null or
    // points at `ts`; both outlive the call. A null signal mask keeps the thread's mask.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ts_ptr, std::ptr::null()) };
    ready.clear();
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            ready.resize(fds.len(), false);
            return Ok(());
        }
        return Err(e);
    }
    ready.extend(pfds.iter().map(|p| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0));
    Ok(())
}

/// Lets this thread's timers fire within 1 µs of their time instead of the default 50 µs
/// slack: the emulator sleeps until the next packet is due.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory of ours.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            1000 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// From now on SIGINT and SIGTERM (and SIGHUP if `hangup`, else it is ignored) set a flag
/// instead of killing the process; [`stop_requested`] reads it. No SA_RESTART: a blocking
/// call returns EINTR, so a waiting loop sees the flag at once.
pub fn catch_stop_signals(hangup: bool) {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for (sig, h) in [
        (libc::SIGINT, handler),
        (libc::SIGTERM, handler),
        (libc::SIGHUP, if hangup { handler } else { libc::SIG_IGN }),
    ] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction struct is zeroed (empty mask, no flags) and lives across the call.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = h;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether a signal caught by [`catch_stop_signals`] arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Sends `signal` to process `pid`.
pub fn kill(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"));
    };
    if pid <= 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "refusing to signal a process group"));
    }
    // SAFETY: kill(2) takes two integers; a positive pid names one process.
    if unsafe { libc::kill(pid, signal) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `signal` to the process group `pgid` leads (a child started with
/// `process_group(0)`: the endpoint and anything it started).
pub fn kill_group(pgid: u32, signal: libc::c_int) -> io::Result<()> {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"));
    };
    if pgid <= 1 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "refusing to signal this process group"));
    }
    // SAFETY: kill(2) takes two integers; a negative pid names the process group.
    if unsafe { libc::kill(-pgid, signal) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits for the child `pid` (`nohang`: only if it has exited) and reaps it: its exit status
/// and the CPU seconds (user + system) it and the descendants it waited for used
/// (wait4(2)'s resource usage). `None` with `nohang` while it runs. Use it instead of
/// `Child::wait`, never both.
pub fn wait_cpu(pid: u32, nohang: bool) -> io::Result<Option<(std::process::ExitStatus, f64)>> {
    use std::os::unix::process::ExitStatusExt;
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"));
    };
    if pid <= 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a single process"));
    }
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if nohang { libc::WNOHANG } else { 0 };
    loop {
        // SAFETY: wait4 with valid pointers to a status and a rusage we own.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if r == 0 {
            return Ok(None);
        }
        if r > 0 {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
            return Ok(Some((std::process::ExitStatus::from_raw(status), cpu)));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Clock ticks per second (the unit of /proc's CPU times).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf takes an integer and returns one.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The effective user ID.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    unsafe { libc::geteuid() }
}

/// Moves the calling thread into the network namespace `ns` (a name under /run/netns).
/// Sockets it creates afterwards belong to that namespace; other threads are unaffected.
pub fn enter_netns(ns: &str) -> io::Result<()> {
    let f =
        File::open(format!("/run/netns/{ns}")).map_err(|e| io::Error::new(e.kind(), format!("namespace {ns}: {e}")))?;
    // SAFETY: setns(2) takes a descriptor (open for the call) and a flag.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("entering namespace {ns}: {e}")));
    }
    Ok(())
}

/// Sets a socket's receive (`SO_RCVBUFFORCE`) or send (`SO_SNDBUFFORCE`) buffer, above
/// `net.core.rmem_max`/`wmem_max` (root only; falls back to the capped option).
pub fn force_buffer(fd: RawFd, receive: bool, bytes: usize) -> io::Result<()> {
    let (force, plain) =
        if receive { (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF) } else { (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF) };
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for opt in [force, plain] {
        // SAFETY: the option value is one c_int that lives across the call.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
    }
    Err(io::Error::last_os_error())
}

/// Moves the calling thread to the real-time FIFO class at `priority` (1-99): it runs
/// before every ordinary thread whenever it is runnable. The kernel's real-time throttling
/// (`kernel.sched_rt_runtime_us`, 95 % by default) keeps a busy thread from locking the
/// machine.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: `param` is a valid sched_param that lives across the call; pid 0 is the
    // calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Turns on UDP generic segmentation offload (`UDP_SEGMENT`, Linux 4.18) with segments of
/// `size` bytes: one send of several segments' worth of bytes leaves as that many datagrams,
/// for a fraction of the system calls.
pub fn udp_segment(fd: RawFd, size: usize) -> io::Result<()> {
    // linux/udp.h; the libc crate has these for some targets only.
    const SOL_UDP: libc::c_int = 17;
    const UDP_SEGMENT: libc::c_int = 103;
    let v =
        libc::c_int::try_from(size).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "segment too large"))?;
    // SAFETY: the option value is one c_int that lives across the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            SOL_UDP,
            UDP_SEGMENT,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
