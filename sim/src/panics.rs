//! Catching panics during a run: tokio swallows a panic in a spawned task (the connection task of
//! an HTTP request, for example), so a process-wide hook records every panic that happens on a
//! thread while it runs a seed, and stops the node's blocking work ([`annal::env::sim::halt`]) so a
//! half-finished group commit cannot hang the thread. A recorded panic fails the seed.
//!
//! Invariant: the hook only records panics of threads inside [`begin`] .. [`end`]; any other panic
//! goes to the previous hook unchanged.

use std::cell::{Cell, RefCell};
use std::sync::Once;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if ACTIVE.with(|a| a.get()) {
                PANICS.with(|p| p.borrow_mut().push(info.to_string().replace('\n', " ")));
                annal::env::sim::halt();
            } else {
                prev(info);
            }
        }));
    });
}

/// Starts recording panics of this thread (and allows the node's blocking work again).
pub fn begin() {
    install();
    annal::env::sim::reset_halt();
    PANICS.with(|p| p.borrow_mut().clear());
    ACTIVE.with(|a| a.set(true));
}

/// Panics recorded since [`begin`], without stopping.
pub fn seen() -> usize {
    PANICS.with(|p| p.borrow().len())
}

/// Stops recording; returns the panics recorded since [`begin`].
pub fn end() -> Vec<String> {
    ACTIVE.with(|a| a.set(false));
    annal::env::sim::reset_halt();
    PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()))
}
