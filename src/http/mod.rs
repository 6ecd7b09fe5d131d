//! The HTTP API (being written): serves every connection with hyper until shutdown.

use std::sync::Arc;

use crate::env::Listener;
use crate::node::Node;

/// Serves connections from `listener` until the node's shutdown is requested.
pub async fn serve(node: Arc<Node>, mut listener: Box<dyn Listener>) {
    let mut stop = node.shutdown_requested();
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            r = listener.accept() => {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "accept failed");
                }
            }
        }
    }
}
