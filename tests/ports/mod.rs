//! Ports for the node processes a test starts, shared by the test files that start them.
//!
//! A port the kernel hands out for `bind(0)` comes from the ephemeral range (32768–60999 by
//! default), which is also where every outgoing connection's local port comes from: between the
//! test's choice and the node's bind, a connection of a test running beside it could take the
//! port ("Address already in use", seen in CI). So ports are chosen below that range, each one
//! once per test process, and only if they can be bound now.

use std::sync::atomic::{AtomicU32, Ordering};

/// The first port chosen from.
const FIRST: u32 = 20_000;
/// How many ports (all below the default ephemeral range).
const SPAN: u32 = 12_000;

/// A port on 127.0.0.1 that nothing listens on now, never the same twice in this process.
#[allow(clippy::disallowed_types)]
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Test processes that run one after another start at different places.
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (FIRST + (start + n) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN);
}
