//! The node: the one place that wires it, and its lifecycle.
//!
//! [`Node::open`] builds every service from its section of the typed configuration before any
//! listener starts: the store (recovered, then — a single node being its own leader — a new epoch),
//! the users and access control (default users created, the user cache following committed
//! records), and
//! the scavenger, and the persistent subscriptions. The services reach the HTTP API as one handle
//! ([`Services`], through the node). TLS ([`crate::tls::Tls`]) is loaded here too, before any
//! listener: a node whose certificates fail a check does not start.
//!
//! Persistent subscriptions and projections run where writes are taken: a single node starts
//! them when it binds; a cluster node starts them each time it becomes the leader, and they
//! answer as not ready as soon as it is not (subscriptions drop their groups at their next tick,
//! a projection stops after its batch).
//!
//! Lifecycle: open, [`Node::bind`] (the listener, then serving), [`Node::request_shutdown`]
//! (the listener closes, requests in flight finish, a running scavenge stops at its next
//! checkpoint, the store is closed): everything acknowledged is kept. An operator's stop
//! ([`Node::shut_down_gracefully`]) first hands a cluster leader's role over.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::auth::Auth;
use crate::cluster::shell::Cluster;
use crate::config::Config;
use crate::env::{Disk, Env};
use crate::projections::Projections;
use crate::scavenge::{ScavengeError, Scavenger};
use crate::store::{StorageError, Store};
use crate::subscriptions::Subscriptions;

/// The most a leader that shuts down waits for its hand-over ([`Node::shut_down_gracefully`]).
pub const HANDOVER_MAX: std::time::Duration = std::time::Duration::from_secs(5);
/// How often it looks whether the hand-over happened.
const HANDOVER_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// How often a single node tries again to start its services after a failure of the store.
pub const SERVICES_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Start-up failures.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The database could not be opened.
    #[error("cannot open the database: {0}")]
    Storage(#[from] StorageError),
    /// The default users could not be written (a node without them refuses every credential).
    #[error("cannot create the default users: {0}")]
    Users(#[from] crate::auth::UserError),
    /// The scavenge database could not be opened.
    #[error("cannot open the scavenge database: {0}")]
    Scavenge(#[from] ScavengeError),
    /// The replication endpoint could not be bound.
    #[error("cannot start the cluster node on {addr}: {source}")]
    Cluster {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Another process (or another open node) holds the database directory's lock.
    #[error("cannot lock the database directory: {0}")]
    Lock(#[from] crate::dblock::LockError),
    /// The certificates failed a check.
    #[error("cannot load the certificates: {0}")]
    Tls(#[from] crate::tls::ReloadError),
    /// The projections could not be loaded or created.
    #[error("cannot start the projections: {0}")]
    Projections(#[from] crate::projections::ProjError),
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

/// Reads the node's configuration again ([`Node::set_config_source`]).
pub type ConfigSource = Arc<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// The services of a node, built by [`Node::open`].
pub struct Services {
    /// Streams, the log and the index.
    pub store: Arc<Store>,
    /// Users, credentials and stream access.
    pub auth: Arc<Auth>,
    /// Scavenging.
    pub scavenger: Arc<Scavenger>,
    /// Persistent subscriptions (running only where writes are taken).
    pub subscriptions: Arc<Subscriptions>,
    /// Projections (running only where writes are taken, and unless `RunProjections` is None).
    pub projections: Arc<Projections>,
}

/// A running node's shared state (handed to every HTTP request).
pub struct Node {
    env: Env,
    config: Arc<Config>,
    services: Services,
    started_wall_us: i64,
    instance_id: uuid::Uuid,
    shutdown: tokio::sync::watch::Sender<bool>,
    /// Set when a stop began (a leader's hand-over comes before `shutdown`).
    stopping: tokio::sync::watch::Sender<bool>,
    /// The cluster side, started by [`Node::bind`] on a cluster node.
    cluster: std::sync::OnceLock<Arc<Cluster>>,
    /// The database was created empty at this start.
    fresh: bool,
    /// The figures no service owns, and the metric settings.
    metrics: crate::metrics::Metrics,
    /// Changes the process's log level (`/admin/loglevel`), when the process set one.
    log_control: std::sync::Mutex<Option<crate::logs::SharedLogControl>>,
    /// The certificates in force (`None`: plain HTTP).
    tls: Option<Arc<crate::tls::Tls>>,
    /// Reads the configuration again at a reload (the YAML file may have changed), when set.
    config_source: std::sync::Mutex<Option<ConfigSource>>,
    /// Held from open until the store is closed at shutdown: `annal restore` refuses a directory
    /// a node holds.
    db_lock: std::sync::Mutex<Option<crate::dblock::DbLock>>,
}

impl Node {
    /// Opens the database and builds the services; certificate files are read through `env`'s disk.
    pub fn open(env: Env, config: Config) -> Result<Arc<Node>, NodeError> {
        let files = env.disk.clone();
        Node::open_with_files(env, config, files)
    }

    /// Opens the database and builds the services; certificate files are read through `files`
    /// (the real disk when the database is in memory).
    pub fn open_with_files(env: Env, config: Config, files: Arc<dyn Disk>) -> Result<Arc<Node>, NodeError> {
        let tls = match &config.tls {
            Some(settings) => Some(crate::tls::Tls::load(&env, files, settings.clone())?),
            None => None,
        };
        let db_lock = crate::dblock::DbLock::acquire(&env, &config.db)?;
        let store = Store::recover(&env, config.store_config())?;
        if store.recovery.torn_bytes > 0 || store.recovery.truncated_to.is_some() {
            tracing::warn!(report = ?store.recovery, "recovery changed the log");
        }
        let fresh = store.log().durable() == 0;
        let replicated = config.cluster.is_cluster();
        if !replicated {
            // A single node is its own leader: each start begins a new epoch. A cluster node
            // writes nothing until it is elected (then its epoch and, once, the default users).
            store.start_epoch([0; 16])?;
        }
        let auth = Arc::new(Auth::new(env.clone(), store.clone(), config.auth_config().password_iterations));
        if !replicated {
            auth.ensure_default_users_blocking()?;
        }
        let endpoint = SocketAddr::new(config.http_ip, config.http_port).to_string();
        let scavenger = Scavenger::open(store.clone(), config.scavenge_config(endpoint))?;
        let subscriptions = Subscriptions::new(env.clone(), store.clone());
        let projections = Projections::new(
            env.clone(),
            store.clone(),
            config.run_projections,
            config.start_standard_projections,
        );
        projections.set_query_expiry(config.projections_query_expiry);
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let (stopping, _) = tokio::sync::watch::channel(false);
        let metrics = crate::metrics::Metrics::new(config.metrics_naming, config.metrics_groups.clone());
        let interval = config.metrics_groups.scrape_interval_secs;
        store.stats.flush_size_max.set_scrape_interval(interval);
        store.stats.flush_duration_max.set_scrape_interval(interval);
        for lane in &store.lanes {
            lane.wait_max.set_scrape_interval(interval);
        }
        Ok(Arc::new(Node {
            services: Services { store, auth, scavenger, subscriptions, projections },
            metrics,
            log_control: std::sync::Mutex::new(None),
            started_wall_us: env.clock.wall_micros(),
            instance_id: env.new_uuid(),
            env,
            config: Arc::new(config),
            shutdown,
            stopping,
            cluster: std::sync::OnceLock::new(),
            fresh,
            tls,
            config_source: std::sync::Mutex::new(None),
            db_lock: std::sync::Mutex::new(Some(db_lock)),
        }))
    }

    /// Lets `/admin/loglevel` change the log of the process that runs the node.
    pub fn set_log_control(&self, control: crate::logs::SharedLogControl) {
        *self.log_control.lock().unwrap_or_else(|e| e.into_inner()) = Some(control);
    }

    /// The log control, when the process set one.
    pub fn log_control(&self) -> Option<crate::logs::SharedLogControl> {
        self.log_control.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The node-wide metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// The environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The services.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.services.store
    }

    /// Users and access control.
    pub fn auth(&self) -> &Arc<Auth> {
        &self.services.auth
    }

    /// The scavenger.
    pub fn scavenger(&self) -> &Arc<Scavenger> {
        &self.services.scavenger
    }

    /// Persistent subscriptions.
    pub fn subscriptions(&self) -> &Arc<Subscriptions> {
        &self.services.subscriptions
    }

    /// Projections.
    pub fn projections(&self) -> &Arc<Projections> {
        &self.services.projections
    }

    /// The cluster side (`None` on a single node, or before [`Node::bind`]).
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.get()
    }

    /// The certificates in force (`None`: plain HTTP).
    pub fn tls(&self) -> Option<&Arc<crate::tls::Tls>> {
        self.tls.as_ref()
    }

    /// The URL scheme of this node's HTTP API.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Sets how a reload reads the configuration again (the binary parses its command line,
    /// environment and YAML file again: only the file can have changed). Without one, a reload
    /// re-reads the certificate files with the settings the node started with.
    pub fn set_config_source(&self, source: ConfigSource) {
        *self.config_source.lock().unwrap_or_else(|e| e.into_inner()) = Some(source);
    }

    /// Reloads the certificates (`POST /admin/reloadconfig`, `SIGHUP`): the certificate settings
    /// (paths, `CertificateReservedNodeCommonName`, the reset interval) are read again from the
    /// configuration, the files read and checked again and, when every check passes, used by
    /// every new connection. `None` on a node without TLS (nothing to reload).
    pub async fn reload_certificates(
        &self,
    ) -> Option<Result<crate::tls::CertFacts, crate::tls::ReloadError>> {
        let Some(tls) = self.tls.clone() else {
            tracing::info!("skipping the reload of certificates since TLS is disabled");
            return None;
        };
        let source = self.config_source.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Some(self.env.blocking(move || reload(&tls, source)).await)
    }

    /// When the node started (µs since the epoch).
    pub fn started_wall_us(&self) -> i64 {
        self.started_wall_us
    }

    /// This node's instance id.
    pub fn instance_id(&self) -> uuid::Uuid {
        self.instance_id
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
        if self.config.cluster.is_cluster() && self.cluster.get().is_none() {
            self.start_cluster(local).await?;
        } else if !self.config.cluster.is_cluster() {
            self.start_services().await;
        }
        if self.config.enable_unix_socket {
            crate::redact::server::start(self.clone())
                .await
                .map_err(|source| NodeError::Bind { addr: local, source })?;
        }
        let node = self.clone();
        Ok((local, async move {
            crate::http::serve(node.clone(), listener).await;
            node.subscriptions().stop();
            node.projections().stop_and_wait().await;
            // A running scavenge stops at its next checkpoint and resumes on the next start.
            if node.scavenger().current().is_some() {
                let _ = node.scavenger().stop("current").await;
            }
            let store = node.store().clone();
            let closed = node.env.blocking(move || store.close()).await;
            node.db_lock.lock().unwrap_or_else(|e| e.into_inner()).take();
            closed
        }))
    }

    /// Starts the cluster side: the replication endpoint, the core's driver, and the task that
    /// writes the default users whenever this node becomes the leader and they are missing.
    async fn start_cluster(self: &Arc<Self>, http: SocketAddr) -> Result<(), NodeError> {
        let mut cfg = self.config.cluster.clone();
        if let Some(tls) = &self.tls {
            cfg.transport = crate::tls::peer::Transport::Tls(tls.clone());
        }
        let addr = cfg.replication_addr;
        let cluster = Cluster::start(
            self.env.clone(),
            self.store().clone(),
            cfg,
            http,
            *self.instance_id.as_bytes(),
            self.fresh,
        )
        .await
        .map_err(|source| NodeError::Cluster { addr, source })?;
        let interval = self.config.metrics_groups.scrape_interval_secs;
        for lane in [&cluster.release_stats, &cluster.replica().write_stats] {
            lane.wait_max.set_scrape_interval(interval);
        }
        let _ = self.cluster.set(cluster.clone());
        let weak = Arc::downgrade(self);
        self.subscriptions().set_leader_check(move || weak.upgrade().is_some_and(|n| n.leads()));
        let weak = Arc::downgrade(self);
        self.projections().set_leader_check(move || weak.upgrade().is_some_and(|n| n.leads()));
        // Each member scavenges its own copy; the history and new points go through the leader.
        self.scavenger().route_shared_writes(crate::http::admin::ClusterLeader::new(self));
        let node = Arc::downgrade(self);
        let env = self.env.clone();
        self.env.rt.spawn(Box::pin(async move {
            let mut seen = 0;
            loop {
                seen = cluster.master_terms().wait_until(|t| t > seen).await;
                // Until the term's services are in place, tried again every SERVICES_RETRY while
                // this node still leads that term (a leader without its default users would
                // answer every request that needs credentials "not ready").
                let mut tries = 0u64;
                loop {
                    let Some(node) = node.upgrade() else { return };
                    let Err(e) = node.start_leader_services().await else { break };
                    if tries == 0 {
                        tracing::warn!(error = %e, term = seen, "the new leader could not start its services; retrying");
                    } else {
                        tracing::debug!(error = %e, term = seen, "the new leader could not start its services; retrying");
                    }
                    tries += 1;
                    if !node.leads() {
                        break;
                    }
                    drop(node);
                    env.rt.sleep(SERVICES_RETRY).await;
                    if cluster.master_terms().get() > seen {
                        break;
                    }
                }
            }
        }));
        Ok(())
    }

    /// What a new leader starts: the default users when they are missing, and while it still
    /// leads, persistent subscriptions and projections.
    async fn start_leader_services(&self) -> Result<(), NodeError> {
        self.auth().ensure_default_users().await?;
        if self.leads() {
            self.try_start_services().await?;
        }
        Ok(())
    }

    /// Starts a single node's services (persistent subscriptions, projections). A failure of the
    /// store on the way (a write refused or dropped) does not keep the node from serving: it is
    /// logged, and the start is tried again every [`SERVICES_RETRY`] until it succeeds or the node
    /// shuts down (meanwhile the services' routes answer as when they are not running).
    async fn start_services(self: &Arc<Self>) {
        let Err(e) = self.try_start_services().await else { return };
        tracing::warn!(error = %e, "persistent subscriptions or projections could not start; retrying");
        let node = Arc::downgrade(self);
        let mut stop = self.shutdown_requested();
        let env = self.env.clone();
        self.env.rt.spawn(Box::pin(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => return,
                    _ = env.rt.sleep(SERVICES_RETRY) => {}
                }
                let Some(node) = node.upgrade() else { return };
                match node.try_start_services().await {
                    Ok(()) => return tracing::info!("persistent subscriptions and projections started"),
                    Err(e) => tracing::debug!(error = %e, "persistent subscriptions or projections could not start; retrying"),
                }
            }
        }));
    }

    async fn try_start_services(&self) -> Result<(), NodeError> {
        self.subscriptions().start().await?;
        self.projections().start().await?;
        Ok(())
    }

    /// Whether this node takes writes: a single node always, a cluster node while it is the
    /// leader (`Master`).
    pub fn leads(&self) -> bool {
        match self.cluster.get() {
            None => !self.config.cluster.is_cluster(),
            Some(c) => c.status().state == crate::cluster::VNodeState::Master,
        }
    }

    /// Asks the node to stop: the listener closes, requests in flight finish.
    pub fn request_shutdown(&self) {
        self.stopping.send_replace(true);
        if let Some(cluster) = self.cluster() {
            cluster.leave();
        }
        self.shutdown.send_replace(true);
    }

    /// Completes when a stop began: [`Node::shut_down_gracefully`] (before a leader's
    /// hand-over) or [`Node::request_shutdown`]. The process bounds a stop from here.
    pub fn stop_began(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Stops the node as an operator's stop should (SIGTERM, `POST /admin/shutdown`): a cluster
    /// leader first resigns and waits (at most [`HANDOVER_MAX`]) until it has handed over to
    /// the most up-to-date follower, so the cluster takes writes again without waiting for an
    /// election timeout; then [`Node::request_shutdown`].
    pub async fn shut_down_gracefully(&self) {
        self.stopping.send_replace(true);
        if let Some(cluster) = self.cluster() {
            if cluster.resign().is_ok() {
                let clock = &self.env.clock;
                let began = clock.monotonic();
                tracing::info!("shutting down: handing the leadership over first");
                loop {
                    let state = cluster.state();
                    let leading = matches!(
                        state,
                        crate::cluster::VNodeState::Master
                            | crate::cluster::VNodeState::PreMaster
                            | crate::cluster::VNodeState::ResigningLeader
                    );
                    let took = clock.monotonic().saturating_sub(began);
                    if !leading {
                        tracing::info!(?took, now = state.name(), "leadership handed over");
                        break;
                    }
                    if took >= HANDOVER_MAX {
                        tracing::warn!(?took, "the leadership was not handed over in time; stopping anyway");
                        break;
                    }
                    self.env.rt.sleep(HANDOVER_POLL).await;
                }
            }
        }
        self.request_shutdown();
    }

    /// Completes when shutdown is requested.
    pub fn shutdown_requested(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }
}

/// A reload with the settings read again through `source` (when there is one).
fn reload(
    tls: &crate::tls::Tls,
    source: Option<ConfigSource>,
) -> Result<crate::tls::CertFacts, crate::tls::ReloadError> {
    use crate::tls::ReloadError;
    let settings = match source.map(|read| read()) {
        None => None,
        Some(Ok(Config { tls: Some(s), .. })) => Some(Ok(s)),
        Some(Ok(_)) => Some(Err(ReloadError::Options(
            "the configuration no longer sets CertificateFile (or now sets Insecure): TLS cannot be turned off by a reload"
                .into(),
        ))),
        Some(Err(e)) => Some(Err(ReloadError::Options(e))),
    };
    let settings = match settings {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            tracing::error!(error = %e, "an error occurred while reloading the configuration; nothing changed");
            return Err(e);
        }
    };
    tls.reload_with(settings)
}
