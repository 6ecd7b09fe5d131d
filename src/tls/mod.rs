//! TLS: the node's certificates, the client HTTP API over TLS, mutual TLS between nodes, and
//! `annal certs`.
//!
//! [`Tls`] owns the certificate set in force. It is loaded and checked whole at start
//! ([`load::load`]; any failure stops the node) and again on each reload
//! (`POST /admin/reloadconfig`, `SIGHUP`): a reload builds every rustls configuration from the
//! new set first and swaps them in with one pointer store, so a failed reload changes nothing and
//! each new connection sees either the old set or the new one, never a mix. Connections already
//! open keep the set they started with; node-to-node connections are re-established every
//! [`TlsSettings::peer_reset`] ([`peer`]), so a rolled certificate reaches the cluster within
//! that interval. A node certificate with 30 days or fewer left is warned about at load and reload.
//!
//! Everything reaches the world through the Env seam: certificate files through a [`Disk`], the
//! time certificates are checked against through the Env clock ([`EnvTime`]); rustls runs over the
//! Env's streams.
//!
//! Modules: [`load`] (reading and checking a set), [`names`] (name and reserved-CN rules),
//! [`accept`] (the HTTP API's TLS handshake), [`peer`] (node-to-node connections), [`tool`]
//! (`annal certs`).

pub mod accept;
pub mod load;
pub mod names;
pub mod peer;
pub mod tool;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::UnixTime;
use rustls::{ClientConfig, ServerConfig};

pub use self::load::{CertError, CertFacts, CertPaths};
use crate::env::{Clock, Disk, Env};

/// How long a node-to-node connection lives before it is re-established (so a reloaded
/// certificate is used by the whole cluster within it), by default.
pub const DEFAULT_PEER_RESET: Duration = Duration::from_secs(600);
/// A node certificate this close to its end (or closer) is warned about at load and reload.
pub const EXPIRY_WARNING_DAYS: i64 = 30;
/// A client must complete its TLS handshake within this long.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS section of the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The certificate files.
    pub paths: CertPaths,
    /// Lifetime of node-to-node connections (`NodeConnectionResetIntervalMs`).
    pub peer_reset: Duration,
}

/// The cryptography every configuration uses: rustls with ring, AES-128-GCM preferred (as
/// strong as needed, and cheaper than AES-256 on bulk data such as feed pages).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::cipher_suite as cs;
    let mut p = rustls::crypto::ring::default_provider();
    let first = [
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ];
    p.cipher_suites.sort_by_key(|s| !first.iter().any(|f| f.suite() == s.suite()));
    Arc::new(p)
}

/// The Env clock as rustls's time source: certificates are checked against it.
#[derive(Clone)]
pub struct EnvTime(pub Arc<dyn Clock>);

impl std::fmt::Debug for EnvTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvTime")
    }
}

impl rustls::time_provider::TimeProvider for EnvTime {
    fn current_time(&self) -> Option<UnixTime> {
        let us = u64::try_from(self.0.wall_micros()).ok()?;
        Some(UnixTime::since_unix_epoch(Duration::from_micros(us)))
    }
}

impl EnvTime {
    fn now(&self) -> UnixTime {
        rustls::time_provider::TimeProvider::current_time(self)
            .unwrap_or(UnixTime::since_unix_epoch(Duration::ZERO))
    }
}

/// The rustls configurations of one certificate set.
pub struct Active {
    /// The settings the set was loaded with.
    pub settings: TlsSettings,
    /// The set.
    pub set: load::CertSet,
    /// The client HTTP API: no client certificate asked for.
    pub http: Arc<ServerConfig>,
    /// Accepting node-to-node connections: the peer must present a certificate that chains to a
    /// trusted root.
    pub peer_server: Arc<ServerConfig>,
    /// Opening node-to-node connections (and forwarding writes to the leader): the peer's
    /// certificate must chain to a trusted root and name the address dialled; this node
    /// presents its own certificate.
    pub peer_client: Arc<ClientConfig>,
}

/// Why a reload did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new set failed a check; the old one stays in force.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// rustls refused to build a configuration from the set.
    #[error("cannot configure TLS with the new certificates: {0}")]
    Config(String),
    /// The configuration could not be read again.
    #[error("cannot read the configuration again: {0}")]
    Options(String),
    /// Another reload is running.
    #[error("a reload of the certificates is already in progress")]
    InProgress,
}

/// The certificate set in force and the configurations built from it.
pub struct Tls {
    files: Arc<dyn Disk>,
    time: EnvTime,
    active: Mutex<Arc<Active>>,
    reloading: Mutex<()>,
    /// Reloads that put a new set in force and that failed (for metrics).
    pub reloads: [std::sync::atomic::AtomicU64; 2],
    /// Whether the last reload succeeded (true before any).
    pub last_reload_ok: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("settings", &self.current().settings).finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads and checks the configured set (`files` reads the certificate files).
    pub fn load(env: &Env, files: Arc<dyn Disk>, settings: TlsSettings) -> Result<Arc<Tls>, ReloadError> {
        let time = EnvTime(env.clock.clone());
        let active = build(&*files, settings, &time)?;
        log_set("certificates loaded", &active.set);
        warn_expiry(&active.set, &time);
        Ok(Arc::new(Tls {
            files,
            time,
            active: Mutex::new(Arc::new(active)),
            reloading: Mutex::new(()),
            reloads: Default::default(),
            last_reload_ok: std::sync::atomic::AtomicBool::new(true),
        }))
    }

    /// The set in force (each new connection takes it once).
    pub fn current(&self) -> Arc<Active> {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The settings in force.
    pub fn settings(&self) -> TlsSettings {
        self.current().settings.clone()
    }

    /// Reads the configured files again and, when every check passes, puts the new set in force.
    /// Blocks (file reads, signature checks): run it off the async tasks.
    pub fn reload(&self) -> Result<CertFacts, ReloadError> {
        self.reload_with(None)
    }

    /// [`Tls::reload`] with new settings (paths, reserved common name, reset interval) read again
    /// from the configuration, which take effect together with the set they load.
    pub fn reload_with(&self, settings: Option<TlsSettings>) -> Result<CertFacts, ReloadError> {
        let Ok(_one) = self.reloading.try_lock() else { return Err(ReloadError::InProgress) };
        let old = self.current();
        tracing::info!(thumbprint = %old.set.about.thumbprint, "certificate reload started");
        let settings = settings.unwrap_or_else(|| old.settings.clone());
        match build(&*self.files, settings, &self.time) {
            Ok(new) => {
                let facts = new.set.about.clone();
                tracing::info!(
                    old = %old.set.about.thumbprint,
                    new = %facts.thumbprint,
                    cn = %facts.cn,
                    reserved_cn = %new.set.reserved_cn,
                    "certificates reloaded: all certificates successfully loaded"
                );
                warn_expiry(&new.set, &self.time);
                let mut new = new;
                if crate::buggify::bug(crate::buggify::Bug::ReloadKeepsPeerClient) {
                    new.peer_client = old.peer_client.clone();
                }
                *self.active.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
                self.count_reload(true);
                Ok(facts)
            }
            Err(e) => {
                tracing::error!(error = %e, "an error occurred while reloading the certificates; the previous ones stay in use");
                self.count_reload(false);
                Err(e)
            }
        }
    }
}

impl Tls {
    fn count_reload(&self, ok: bool) {
        use std::sync::atomic::Ordering;
        self.reloads[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
        self.last_reload_ok.store(ok, Ordering::Relaxed);
    }
}

fn log_set(what: &str, set: &load::CertSet) {
    tracing::info!(
        cn = %set.about.cn,
        thumbprint = %set.about.thumbprint,
        not_after = set.about.not_after,
        reserved_cn = %set.reserved_cn,
        reserved_auto = set.reserved_auto,
        "{what}"
    );
}

/// Logs a warning when the node certificate has [`EXPIRY_WARNING_DAYS`] or fewer left.
fn warn_expiry(set: &load::CertSet, time: &EnvTime) {
    let now = time.now().as_secs() as i64;
    let days = (set.about.not_after - now) / 86_400;
    if days <= EXPIRY_WARNING_DAYS {
        tracing::warn!(cn = %set.about.cn, thumbprint = %set.about.thumbprint, "certificates are going to expire in {days} days");
    }
}

/// Loads the set and builds its configurations.
fn build(files: &dyn Disk, settings: TlsSettings, time: &EnvTime) -> Result<Active, ReloadError> {
    let set = load::load(files, &settings.paths, time.now())?;
    let provider = provider();
    let time_arc: Arc<dyn rustls::time_provider::TimeProvider> = Arc::new(time.clone());
    let cfg = |e: rustls::Error| ReloadError::Config(e.to_string());
    let versions = rustls::DEFAULT_VERSIONS;
    let mut http = ServerConfig::builder_with_details(provider.clone(), time_arc.clone())
        .with_protocol_versions(versions)
        .map_err(cfg)?
        .with_no_client_auth()
        .with_single_cert(set.chain.clone(), set.key.clone_key())
        .map_err(cfg)?;
    http.alpn_protocols = vec![b"http/1.1".to_vec()];
    http.ignore_client_order = true;
    let mut client_verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(set.roots.clone(), provider.clone())
            .build()
            .map_err(|e| ReloadError::Config(e.to_string()))?;
    if crate::buggify::bug(crate::buggify::Bug::PeerTrustsAnyClient) {
        client_verifier = Arc::new(bug::AnyClient(client_verifier));
    }
    let peer_server = ServerConfig::builder_with_details(provider.clone(), time_arc.clone())
        .with_protocol_versions(versions)
        .map_err(cfg)?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(set.chain.clone(), set.key.clone_key())
        .map_err(cfg)?;
    let peer_client = ClientConfig::builder_with_details(provider, time_arc)
        .with_protocol_versions(versions)
        .map_err(cfg)?
        .with_root_certificates(set.roots.clone())
        .with_client_auth_cert(set.chain.clone(), set.key.clone_key())
        .map_err(cfg)?;
    Ok(Active {
        settings,
        set,
        http: Arc::new(http),
        peer_server: Arc::new(peer_server),
        peer_client: Arc::new(peer_client),
    })
}

/// What the bug switches put in place of a real check (the simulator proves its checkers catch
/// them).
mod bug {
    use std::sync::Arc;

    use rustls::client::danger::HandshakeSignatureValid;
    use rustls::pki_types::{CertificateDer, UnixTime};
    use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
    use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

    /// `peer-trusts-any-client`: the real verifier, except that any chain is taken.
    #[derive(Debug)]
    pub struct AnyClient(pub Arc<dyn ClientCertVerifier>);

    impl ClientCertVerifier for AnyClient {
        fn root_hint_subjects(&self) -> &[DistinguishedName] {
            self.0.root_hint_subjects()
        }
        fn verify_client_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _now: UnixTime,
        ) -> Result<ClientCertVerified, rustls::Error> {
            Ok(ClientCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }
}
