//! Ports for upstreams that must listen on a port named in a config
//! (`proxy: http://127.0.0.1:<port>`), handed out once per machine at a time.
//!
//! A test that writes a config for the proxy needs the port before the
//! upstream binds it, and in between another test process (a test runner such
//! as nextest runs each test in its own) can be handed the same free port:
//! one of the two upstreams then fails to bind, or, worse, the proxy's health
//! check reaches the other test's upstream. So a port is reserved with an
//! advisory lock on a file named for it in a directory under the temporary
//! directory, held until the process exits (the kernel drops the lock then,
//! even on a crash), and only a port whose lock this process won is handed out.
//!
//! Ports are drawn below the kernel's ephemeral range (read from
//! `/proc/sys/net/ipv4/ip_local_port_range`, 32768 and up by default), from
//! 20000: a port in that range may be the kernel's pick for a client
//! connection's local end or a `127.0.0.1:0` listener before the upstream
//! binds it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Mutex;

/// The lowest port handed out.
const LOW: u16 = 20_000;

/// Draws tried before giving up.
const DRAWS: usize = 2_000;

/// The locks this process holds, one per reserved port, kept until it exits.
static HELD: Mutex<Vec<(u16, File)>> = Mutex::new(Vec::new());

/// Reserves a free loopback port for this process until it exits: no other
/// process calling this function is handed it meanwhile, and nothing listened
/// on it when it was drawn.
///
/// # Errors
///
/// The lock directory cannot be created or written, or no free port was
/// found in 2000 draws.
pub fn reserve_port() -> io::Result<u16> {
    reserve_ports(1)
}

/// Reserves `n` consecutive free loopback ports (for a config numbering
/// `${PORT}` from the first) and returns the first; otherwise as
/// [`reserve_port`].
///
/// # Errors
///
/// As [`reserve_port`]; also when `n` is 0 or wider than the range.
pub fn reserve_ports(n: u16) -> io::Result<u16> {
    let range = port_range();
    if n == 0 || n >= range.end - range.start {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot reserve {n} consecutive ports in {range:?}"),
        ));
    }
    let dir = std::env::temp_dir().join("mockswap-ports");
    std::fs::create_dir_all(&dir)?;
    for draw in 0..DRAWS {
        let start = candidate(&range, n, draw);
        if let Some(locks) = try_reserve(&dir, start, n)? {
            let mut held = HELD
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            held.extend((start..start + n).zip(locks));
            return Ok(start);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no run of {n} free ports in {range:?} after {DRAWS} draws"),
    ))
}

/// The locks of `start..start + n` when this process won every one of them and
/// every port is free; `None` when any is taken.
fn try_reserve(dir: &std::path::Path, start: u16, n: u16) -> io::Result<Option<Vec<File>>> {
    let mut locks = Vec::with_capacity(usize::from(n));
    for port in start..start + n {
        if HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(held, _)| *held == port)
        {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path(dir, port))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(error)) => return Err(error),
        }
        // Locked: nobody else reserved it. Free now (a process that never
        // reserves, or a stale listener, may still hold it).
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            return Ok(None);
        }
        locks.push(file);
    }
    Ok(Some(locks))
}

fn lock_path(dir: &std::path::Path, port: u16) -> PathBuf {
    dir.join(format!("{port}.lock"))
}

/// Below the kernel's ephemeral range, from [`LOW`]; at least 2000 ports.
fn port_range() -> Range<u16> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    LOW..ephemeral_low.max(LOW + 2_000)
}

/// A pseudo-random start for draw `draw`, seeded by the process, so that
/// processes drawing at once mostly try different ports first.
fn candidate(range: &Range<u16>, n: u16, draw: usize) -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_usize(draw);
    let width = u64::from(range.end - range.start - n);
    let offset = u16::try_from(hasher.finish() % width).unwrap_or(0);
    range.start + offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserved_port_is_never_handed_out_twice_in_one_process() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let port = reserve_port().expect("a port");
            assert!(seen.insert(port), "port {port} handed out twice");
        }
    }

    #[test]
    fn a_port_locked_by_another_holder_is_skipped() {
        let port = reserve_port().expect("a port");
        let dir = std::env::temp_dir().join("mockswap-ports");
        // A second open file description of the same lock file stands for
        // another process: its lock must fail while ours is held.
        let other = OpenOptions::new()
            .write(true)
            .open(lock_path(&dir, port))
            .expect("the lock file exists");
        assert!(matches!(other.try_lock(), Err(TryLockError::WouldBlock)));
        assert!(try_reserve(&dir, port, 1).expect("no I/O error").is_none());
    }

    #[test]
    fn consecutive_ports_are_reserved_together() {
        let first = reserve_ports(3).expect("three ports");
        let held = HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for port in first..first + 3 {
            assert!(held.iter().any(|(p, _)| *p == port), "{port} not held");
        }
    }

    #[test]
    fn zero_ports_is_refused() {
        assert_eq!(
            reserve_ports(0).map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidInput)
        );
    }
}
