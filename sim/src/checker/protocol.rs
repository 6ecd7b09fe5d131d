//! Protocol: **nothing unexpected is answered**. Every answer the clients got is one the
//! EventStoreDB v5 HTTP dialect allows for the request (the workload classifies each; anything
//! else is recorded as [`Outcome::Unexpected`]): a harness or protocol bug either way.

use crate::history::{History, Outcome};

/// The violations in `h`.
pub fn check(h: &History) -> Vec<String> {
    h.ops
        .iter()
        .filter_map(|op| match &op.outcome {
            Outcome::Unexpected(w) => Some(format!("unexpected answer: {op} ({w})")),
            _ => None,
        })
        .collect()
}
