//! The node: owns the store, the configuration and the HTTP listener, and its lifecycle
//! (start, serve, graceful shutdown that keeps everything acknowledged).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::Config;
use crate::env::Env;
use crate::scavenge::{ScavengeError, Scavenger};
use crate::store::{StorageError, Store};

/// Start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The database could not be opened.
    #[error("cannot open the database: {0}")]
    Storage(#[from] StorageError),
    /// The scavenge database could not be opened.
    #[error("cannot open the scavenge database: {0}")]
    Scavenge(#[from] ScavengeError),
    /// The HTTP listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// A running node's shared state (handed to every HTTP request).
pub struct Node {
    /// The environment.
    pub env: Env,
    /// The store.
    pub store: Arc<Store>,
    /// The configuration.
    pub config: Arc<Config>,
    /// The scavenger.
    pub scavenger: Arc<Scavenger>,
    /// When the node started (µs since the epoch).
    pub started_wall_us: i64,
    /// This node's instance id.
    pub instance_id: uuid::Uuid,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl Node {
    /// Opens the database.
    pub fn open(env: Env, config: Config) -> Result<Arc<Node>, NodeError> {
        let store = Store::open(&env, config.store_config())?;
        if store.recovery.torn_bytes > 0 || store.recovery.truncated_to.is_some() {
            tracing::warn!(report = ?store.recovery, "recovery changed the log");
        }
        let endpoint = SocketAddr::new(config.http_ip, config.http_port).to_string();
        let scavenger = Scavenger::open(store.clone(), config.scavenge_config(endpoint))?;
        let (shutdown, _) = tokio::sync::watch::channel(false);
        Ok(Arc::new(Node {
            scavenger,
            started_wall_us: env.clock.wall_micros(),
            instance_id: env.new_uuid(),
            env,
            store,
            config: Arc::new(config),
            shutdown,
        }))
    }

    /// Binds the HTTP listener; returns the bound address and a future that serves until shutdown
    /// is requested, then closes the store.
    pub async fn bind(
        self: &Arc<Self>,
    ) -> Result<(SocketAddr, impl std::future::Future<Output = Result<(), StorageError>> + use<>), NodeError>
    {
        let addr = SocketAddr::new(self.config.http_ip, self.config.http_port);
        let listener = self.env.net.listen(addr).await.map_err(|source| NodeError::Bind { addr, source })?;
        let local = listener.local_addr().map_err(|source| NodeError::Bind { addr, source })?;
        let node = self.clone();
        Ok((local, async move {
            crate::http::serve(node.clone(), listener).await;
            // A running scavenge stops at its next checkpoint and resumes on the next start.
            if node.scavenger.current().is_some() {
                let _ = node.scavenger.stop("current").await;
            }
            let store = node.store.clone();
            node.env.blocking(move || store.close()).await
        }))
    }

    /// Asks the node to stop: the listener closes, requests in flight finish.
    pub fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Completes when shutdown is requested.
    pub fn shutdown_requested(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}
