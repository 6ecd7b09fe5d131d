//! No panics: **the node never panics**, whatever the faults. An I/O error, a corrupt record or a
//! full disk must be refused with an error (and the node may go read-only), never a panic.
//!
//! The panics themselves are caught during the run ([`crate::panics`]); this check turns each
//! into a failure.

/// One failure per panic caught during the run.
pub fn check(panics: &[String]) -> Vec<String> {
    panics.iter().map(|p| format!("panic (the node must refuse with an error, never panic): {p}")).collect()
}
