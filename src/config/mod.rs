//! Server options: one table ([`OPTIONS`]) drives the command line, the YAML file, the `ANNAL_`
//! environment variables, `--help` and `GET /info/options`.
//!
//! Precedence, lowest first: built-in default, YAML file (`--config`), environment, command line.
//! Every option has a YAML key (PascalCase, as in the spec), a flag (`--kebab-case`) and an
//! environment variable (`ANNAL_` + SCREAMING_SNAKE_CASE). Unknown or malformed options are errors.
//!
//! The table itself is in [`options`]; this module parses the sources into the typed
//! [`Config`].

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub mod options;

#[cfg(test)]
use options::env_of_flag;
pub use options::*;
use options::{spec_by_flag, spec_by_name};

/// Where an option's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Built in.
    Default,
    /// The YAML file.
    File,
    /// An `ANNAL_` variable.
    Environment,
    /// The command line.
    CommandLine,
}

/// Configuration errors (shown to the operator, exit code 2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// An option nobody knows.
    #[error("unknown option {0} (see --help)")]
    Unknown(String),
    /// A value of the wrong shape.
    #[error("invalid value {value:?} for {option}: {reason}")]
    Invalid {
        /// Option name.
        option: String,
        /// The value.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// The YAML file.
    #[error("configuration file {path}: {reason}")]
    File {
        /// Path.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A combination that is not allowed.
    #[error("{0}")]
    Conflict(String),
}

/// Which projections run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunProjections {
    /// None.
    None,
    /// System projections only.
    System,
    /// All.
    All,
}

/// The cluster section of the configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// `ClusterSize`: the voting nodes, at least 1.
    pub cluster_size: usize,
    /// `NodePriority`: preference in leader elections (higher wins among equals).
    pub node_priority: i64,
    /// `GossipSeed`: the other nodes' replication endpoints, without repeats and without entries
    /// naming this node itself (see [`ClusterConfig::names_this_node`]).
    pub gossip_seeds: Vec<SocketAddr>,
    /// `ReplicationIp`:`ReplicationPort` (aliases `IntIp`, `IntTcpPort`).
    pub replication_addr: SocketAddr,
    /// `ReadOnlyReplica`: follows the cluster without voting.
    pub read_only_replica: bool,
    /// `CommitTimeoutMs`.
    pub commit_timeout: Duration,
    /// `PrepareTimeoutMs`.
    pub prepare_timeout: Duration,
    /// `GossipIntervalMs`.
    pub gossip_interval: Duration,
    /// `GossipTimeoutMs`.
    pub gossip_timeout: Duration,
    /// `GossipAllowedDifferenceMs`.
    pub gossip_allowed_difference: Duration,
    /// `LeaderElectionTimeoutMs` (at least 100 ms).
    pub election_timeout: Duration,
    /// `ReplicationHeartbeatInterval` (alias `IntTcpHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// `ReplicationHeartbeatTimeout` (alias `IntTcpHeartbeatTimeout`).
    pub heartbeat_timeout: Duration,
    /// `DeadMemberRemovalPeriodSec`.
    pub dead_member_removal: Duration,
    /// `UnsafeAllowSurplusNodes`.
    pub allow_surplus_nodes: bool,
    /// `MaxTruncation` in bytes.
    /// None = unlimited.
    pub max_truncation: Option<u64>,
    /// How node-to-node connections are carried (plain, or mutual TLS with the node's
    /// certificates); the node sets it before the cluster starts.
    pub transport: crate::tls::peer::Transport,
    /// `DiscoverViaDns` with `ClusterDns` and `ClusterGossipPort`: the other members are the
    /// addresses the name resolves to (besides any `GossipSeed`).
    pub dns: Option<DnsDiscovery>,
    /// `ReplicationHostAdvertiseAs` and `ReplicationTcpPortAdvertiseAs`: how the other nodes
    /// reach this one (its identity in the cluster), when not `replication_addr`.
    pub advertise_replication: Advertise,
    /// `NodeHostAdvertiseAs` and `NodePortAdvertiseAs`: the HTTP endpoint gossip gives clients
    /// for this node, when not the one it listens on.
    pub advertise_http: Advertise,
}

/// Finding the cluster's members through DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsDiscovery {
    /// The name whose A and AAAA records are the members (`ClusterDns`).
    pub name: String,
    /// Their replication port (`ClusterGossipPort`, by default this node's `ReplicationPort`).
    pub port: u16,
}

/// An endpoint as others should reach it: each part `None` where the listener's own stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Advertise {
    /// An IP address or a DNS name (resolved when the node starts).
    pub host: Option<String>,
    /// The port.
    pub port: Option<u16>,
}

/// Checks an IP address or DNS name given as an option (letters, digits, `-`, `_` and `.`, at
/// most 253 characters, labels of at most 63); returns it.
fn host_name(h: &str) -> Result<String, String> {
    if h.parse::<IpAddr>().is_ok() {
        return Ok(h.to_string());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let name = h.strip_suffix('.').unwrap_or(h);
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err("expected an IP address or a DNS name (letters, digits, '-' and '.')".into());
    }
    Ok(h.to_string())
}

/// The least `NodeConnectionResetIntervalMs` accepted: each reset costs a handshake per member.
pub const MIN_NODE_CONNECTION_RESET_MS: u64 = 1000;

/// The least `LeaderElectionTimeoutMs` accepted: shorter rounds would start over before a
/// healthy cluster's votes arrive.
pub const MIN_ELECTION_TIMEOUT_MS: u64 = 100;

impl ClusterConfig {
    /// Nodes whose acknowledgement makes a write durable: `cluster_size / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.cluster_size / 2 + 1
    }

    /// Whether this node is part of a cluster: more than one node, or a read-only replica.
    pub fn is_cluster(&self) -> bool {
        self.cluster_size > 1 || self.read_only_replica
    }

    /// Whether `seed` is this node's own replication endpoint: the same address, or, when this
    /// node listens on every address, its port on a loopback or unspecified address.
    /// The name a member's certificate must carry when dialled: with DNS discovery the cluster's
    /// DNS name (members are found by it and their addresses come and go), else none (the
    /// address dialled).
    pub fn peer_name(&self) -> Option<&str> {
        self.dns.as_ref().map(|d| d.name.as_str())
    }

    pub fn names_this_node(&self, seed: SocketAddr) -> bool {
        let own = self.replication_addr;
        seed == own
            || (own.ip().is_unspecified()
                && seed.port() == own.port()
                && (seed.ip().is_loopback() || seed.ip().is_unspecified()))
    }
}

/// The typed configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Raw values by option name, with their source.
    pub values: BTreeMap<&'static str, (String, Source)>,
    /// `--db`.
    pub db: PathBuf,
    /// `--index`.
    pub index: PathBuf,
    /// `--mem-db`.
    pub mem_db: bool,
    /// `--chunk-size`.
    pub chunk_size: u64,
    /// `--max-event-size`.
    pub max_event_bytes: usize,
    /// `--max-append-size`.
    pub max_append_bytes: usize,
    /// `--mem-table-size`.
    pub memtable_max: usize,
    /// `--max-index-tables`.
    pub max_index_tables: usize,
    /// HTTP worker threads (`0`: one less than the cores, at least 1).
    pub worker_threads: usize,
    /// Whether the node's threads run under `SCHED_BATCH` ([`crate::env::real::batch_scheduling`]).
    pub batch_scheduling: bool,
    /// `--stream-existence-filter-size`.
    pub existence_filter_bytes: u64,
    /// `--stream-info-cache-capacity`.
    pub stream_cache_capacity: usize,
    /// `--http-ip`.
    pub http_ip: IpAddr,
    /// `--http-port`.
    pub http_port: u16,
    /// `--insecure`.
    pub insecure: bool,
    /// The certificates (`None`: plain HTTP, no `CertificateFile` or `--insecure`).
    pub tls: Option<crate::tls::TlsSettings>,
    /// `--enable-unix-socket`.
    pub enable_unix_socket: bool,
    /// `DisableAdminUi`: the Admin UI's URLs answer 404.
    pub disable_admin_ui: bool,
    /// `--run-projections`.
    pub run_projections: RunProjections,
    /// `--start-standard-projections`.
    pub start_standard_projections: bool,
    /// `--projections-query-expiry` (given in minutes).
    pub projections_query_expiry: Duration,
    /// `--log-level`.
    pub log_level: String,
    /// `--log-format`: JSON lines instead of text.
    pub log_json: bool,
    /// `--shutdown-timeout`: how long a shutdown may take before the process exits anyway.
    pub shutdown_timeout: Duration,
    /// `--metrics-naming` (or legacy meters named in the metrics file).
    pub metrics_naming: crate::metrics::Naming,
    /// The metric groups (`--metrics-config`).
    pub metrics_groups: crate::metrics::Groups,
    /// `--help`.
    pub help: bool,
    /// `--version`.
    pub version: bool,
    /// PBKDF2 iterations for new password hashes (not an option: tests lower it for speed).
    pub password_iterations: u32,
    /// The scavenger's section (`--disable-scavenge-merging`, `--scavenge-history-max-age`,
    /// `--scavenge-backend-page-size`, `--scavenge-hash-users-cache-capacity`); the node fills
    /// in its endpoint.
    pub scavenge: crate::scavenge::ScavengeConfig,
    /// The cluster section (`ClusterSize`, `GossipSeed`, `ReplicationIp`, …).
    pub cluster: ClusterConfig,
}

/// Parses a `GossipSeed` list: `ip:port` entries separated by commas, blanks around them ignored.
fn parse_endpoints(value: &str) -> Result<Vec<SocketAddr>, String> {
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    value
        .split(',')
        .map(|entry| {
            let entry = entry.trim();
            let addr: SocketAddr = entry.parse().map_err(|_| {
                format!(
                    "entry {entry:?} is not an ip:port endpoint (such as 10.0.0.2:1112 or [fd00::2]:1112)"
                )
            })?;
            if addr.ip().is_unspecified() || addr.port() == 0 {
                return Err(format!(
                    "entry {entry:?} is not a reachable endpoint (it needs a real address and port)"
                ));
            }
            Ok(addr)
        })
        .collect()
}

fn check(spec: &OptionSpec, value: &str) -> Result<String, ConfigError> {
    let bad = |reason: &str| ConfigError::Invalid {
        option: spec.name.into(),
        value: value.into(),
        reason: reason.into(),
    };
    match spec.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok("true".into()),
            "false" | "0" | "no" => Ok("false".into()),
            _ => Err(bad("expected true or false")),
        },
        Kind::Int => value
            .trim()
            .parse::<u64>()
            .map(|v| v.to_string())
            .map_err(|_| bad("expected a non-negative integer")),
        Kind::SignedInt => {
            value.trim().parse::<i64>().map(|v| v.to_string()).map_err(|_| bad("expected an integer"))
        }
        Kind::Endpoints => parse_endpoints(value)
            .map(|v| v.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(","))
            .map_err(|reason| bad(&reason)),
        Kind::Ip => {
            value.trim().parse::<IpAddr>().map(|v| v.to_string()).map_err(|_| bad("expected an IP address"))
        }
        Kind::Enum(vals) => vals
            .iter()
            .find(|v| v.eq_ignore_ascii_case(value.trim()))
            .map(|v| v.to_string())
            .ok_or_else(|| bad(&format!("expected one of {}", vals.join(", ")))),
        Kind::Text => Ok(value.to_string()),
    }
}

/// The names an option was given by within one source (the YAML file or the environment): naming
/// one option twice there, say by its name and an alias, leaves no order to settle it, so it is
/// refused. (On the command line the last flag wins, as usual.)
#[derive(Default)]
struct Named(BTreeMap<&'static str, String>);

impl Named {
    fn note(&mut self, spec: &'static OptionSpec, key: &str, place: &str) -> Result<(), ConfigError> {
        match self.0.insert(spec.name, key.to_string()) {
            Some(before) => Err(ConfigError::Conflict(format!(
                "{} is given twice {place}, as {before} and as {key}: keep one",
                spec.name
            ))),
            None => Ok(()),
        }
    }
}

/// The cluster section from checked raw values; `http_ip`/`http_port` are the HTTP listener's, to
/// refuse a replication listener on the same port.
fn cluster_from_values(
    values: &BTreeMap<&'static str, (String, Source)>,
    http_ip: IpAddr,
    http_port: u16,
) -> Result<ClusterConfig, ConfigError> {
    let get = |n: &str| values.get(n).map(|(v, _)| v.clone()).unwrap_or_default();
    let flag = |n: &str| get(n) == "true";
    let int = |n: &str| get(n).parse::<u64>().unwrap_or(0);
    let invalid = |n: &str, reason: &str| ConfigError::Invalid {
        option: n.into(),
        value: get(n),
        reason: reason.into(),
    };
    let millis = |n: &str| match int(n) {
        0 => Err(invalid(n, "must be at least 1 millisecond")),
        ms => Ok(Duration::from_millis(ms)),
    };
    let cluster_size =
        usize::try_from(int("ClusterSize")).map_err(|_| invalid("ClusterSize", "too large"))?;
    if cluster_size == 0 {
        return Err(ConfigError::Conflict(
            "ClusterSize 0: a cluster has at least 1 node (1 for a single node)".into(),
        ));
    }
    let read_only_replica = flag("ReadOnlyReplica");
    if read_only_replica && cluster_size == 1 {
        return Err(ConfigError::Conflict(
            "ReadOnlyReplica needs a cluster to follow: set ClusterSize to the number of voting nodes (above 1) and GossipSeed to their replication endpoints".into(),
        ));
    }
    let replication_port = u16::try_from(int("ReplicationPort"))
        .map_err(|_| invalid("ReplicationPort", "must be at most 65535"))?;
    let replication_ip: IpAddr =
        get("ReplicationIp").parse().map_err(|_| invalid("ReplicationIp", "expected an IP address"))?;
    if replication_port != 0
        && replication_port == http_port
        && (replication_ip == http_ip || replication_ip.is_unspecified() || http_ip.is_unspecified())
    {
        return Err(ConfigError::Conflict(format!(
            "ReplicationPort {replication_port} on {replication_ip} is also the HttpPort on {http_ip}: the replication and HTTP listeners need different ports"
        )));
    }
    let election_ms = int("LeaderElectionTimeoutMs");
    if election_ms < MIN_ELECTION_TIMEOUT_MS {
        return Err(invalid(
            "LeaderElectionTimeoutMs",
            &format!("must be at least {MIN_ELECTION_TIMEOUT_MS} milliseconds"),
        ));
    }
    let max_truncation = match get("MaxTruncation").parse::<i64>().unwrap_or(0) {
        -1 => None,
        v => Some(
            u64::try_from(v)
                .map_err(|_| invalid("MaxTruncation", "expected -1 (no limit) or a number of bytes"))?,
        ),
    };
    let port = |n: &str| match u16::try_from(int(n)) {
        Ok(0) => Ok(None),
        Ok(p) => Ok(Some(p)),
        Err(_) => Err(invalid(n, "must be at most 65535")),
    };
    let host = |n: &str| match get(n).trim() {
        "" => Ok(None),
        h => host_name(h).map(Some).map_err(|reason| invalid(n, &reason)),
    };
    let gossip_port = port("ClusterGossipPort")?.unwrap_or(replication_port);
    let dns = match (flag("DiscoverViaDns"), host("ClusterDns")?) {
        (true, Some(name)) => Some(DnsDiscovery { name, port: gossip_port }),
        (true, None) => {
            return Err(ConfigError::Conflict(
                "DiscoverViaDns is on but ClusterDns is empty: name the DNS name whose addresses are the cluster's nodes".into(),
            ))
        }
        (false, _) => None,
    };
    let mut cluster = ClusterConfig {
        cluster_size,
        node_priority: get("NodePriority").parse().unwrap_or(0),
        gossip_seeds: Vec::new(),
        replication_addr: SocketAddr::new(replication_ip, replication_port),
        read_only_replica,
        commit_timeout: millis("CommitTimeoutMs")?,
        prepare_timeout: millis("PrepareTimeoutMs")?,
        gossip_interval: millis("GossipIntervalMs")?,
        gossip_timeout: millis("GossipTimeoutMs")?,
        gossip_allowed_difference: Duration::from_millis(int("GossipAllowedDifferenceMs")),
        election_timeout: Duration::from_millis(election_ms),
        heartbeat_interval: millis("ReplicationHeartbeatInterval")?,
        heartbeat_timeout: millis("ReplicationHeartbeatTimeout")?,
        dead_member_removal: Duration::from_secs(int("DeadMemberRemovalPeriodSec")),
        allow_surplus_nodes: flag("UnsafeAllowSurplusNodes"),
        max_truncation,
        transport: crate::tls::peer::Transport::Plain,
        dns,
        advertise_replication: Advertise {
            host: host("ReplicationHostAdvertiseAs")?,
            port: port("ReplicationTcpPortAdvertiseAs")?,
        },
        advertise_http: Advertise { host: host("NodeHostAdvertiseAs")?, port: port("NodePortAdvertiseAs")? },
    };
    let seeds = parse_endpoints(&get("GossipSeed")).map_err(|reason| invalid("GossipSeed", &reason))?;
    let named = !seeds.is_empty();
    for seed in seeds {
        if !cluster.names_this_node(seed) && !cluster.gossip_seeds.contains(&seed) {
            cluster.gossip_seeds.push(seed);
        }
    }
    let advertised = cluster.advertise_replication.host.is_some();
    if cluster.is_cluster() && ((replication_ip.is_unspecified() && !advertised) || replication_port == 0) {
        return Err(ConfigError::Conflict(format!(
            "ReplicationIp {replication_ip} and ReplicationPort {replication_port}: a cluster node names itself to the others by this endpoint, so it must be the address and port they reach it at (not port 0, and not 0.0.0.0 unless ReplicationHostAdvertiseAs names the address)"
        )));
    }
    if cluster.is_cluster() && cluster.gossip_seeds.is_empty() && cluster.dns.is_none() {
        return Err(ConfigError::Conflict(if named {
            format!(
                "GossipSeed names only this node's own replication endpoint {}: list the other nodes' replication endpoints (ip:port, comma-separated)",
                cluster.replication_addr
            )
        } else {
            format!(
                "ClusterSize is {cluster_size} but GossipSeed is empty: list the other nodes' replication endpoints (ip:port, comma-separated), or find them through DNS (DiscoverViaDns with ClusterDns)"
            )
        }));
    }
    Ok(cluster)
}

impl Config {
    /// Parses the command line (without the program name), the environment (as pairs) and the
    /// YAML file named by `--config` (read through `read_file`).
    pub fn parse(
        args: &[String],
        env: &[(String, String)],
        read_file: impl Fn(&str) -> Result<String, String>,
    ) -> Result<Config, ConfigError> {
        let mut values: BTreeMap<&'static str, (String, Source)> =
            OPTIONS.iter().map(|o| (o.name, (o.default.to_string(), Source::Default))).collect();
        // Command line first (only to find --config), applied last.
        let mut cli: Vec<(&'static OptionSpec, String)> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-').filter(|b| b.len() > 1))
            else {
                return Err(ConfigError::Unknown(a.clone()));
            };
            let (flag, inline) = match body.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (body, None),
            };
            let flag_l = flag.to_ascii_lowercase();
            let spec = spec_by_flag(&flag_l)
                .or_else(|| if flag_l == "h" || flag_l == "?" { spec_by_flag("help") } else { None })
                .or_else(|| spec_by_name(flag))
                .ok_or_else(|| ConfigError::Unknown(a.clone()))?;
            let value = match (inline, spec.kind) {
                (Some(v), _) => v,
                (None, Kind::Bool) => match args.get(i + 1).map(|s| s.to_ascii_lowercase()) {
                    Some(v) if v == "true" || v == "false" => {
                        i += 1;
                        v
                    }
                    _ => "true".into(),
                },
                (None, _) => {
                    i += 1;
                    args.get(i).cloned().ok_or_else(|| ConfigError::Invalid {
                        option: spec.name.into(),
                        value: String::new(),
                        reason: "a value is required".into(),
                    })?
                }
            };
            cli.push((spec, check(spec, &value)?));
            i += 1;
        }
        let config_path = cli
            .iter()
            .find(|(s, _)| s.name == "Config")
            .map(|(_, v)| v.clone())
            .or_else(|| env.iter().find(|(k, _)| k == "ANNAL_CONFIG").map(|(_, v)| v.clone()));
        if let Some(path) = config_path.filter(|p| !p.is_empty()) {
            let text = read_file(&path).map_err(|reason| ConfigError::File { path: path.clone(), reason })?;
            let doc: serde_yaml::Value = serde_yaml::from_str(&text)
                .map_err(|e| ConfigError::File { path: path.clone(), reason: e.to_string() })?;
            let map = match doc {
                serde_yaml::Value::Mapping(m) => m,
                serde_yaml::Value::Null => serde_yaml::Mapping::new(),
                _ => {
                    return Err(ConfigError::File {
                        path,
                        reason: "expected a mapping of option names to values".into(),
                    })
                }
            };
            let mut seen = Named::default();
            for (k, v) in map {
                let key = k.as_str().ok_or_else(|| ConfigError::File {
                    path: path.clone(),
                    reason: "keys must be strings".into(),
                })?;
                let spec =
                    spec_by_name(key).ok_or_else(|| ConfigError::Unknown(format!("{key} (in {path})")))?;
                seen.note(spec, key, &format!("in {path}"))?;
                let text = match v {
                    serde_yaml::Value::String(s) => s,
                    serde_yaml::Value::Bool(b) => b.to_string(),
                    serde_yaml::Value::Number(n) => n.to_string(),
                    serde_yaml::Value::Sequence(items) if spec.kind == Kind::Endpoints => items
                        .iter()
                        .map(|item| match item {
                            serde_yaml::Value::String(s) => Ok(s.clone()),
                            other => Err(ConfigError::Invalid {
                                option: spec.name.into(),
                                value: format!("{other:?}"),
                                reason: "expected ip:port text".into(),
                            }),
                        })
                        .collect::<Result<Vec<_>, _>>()?
                        .join(","),
                    other => {
                        return Err(ConfigError::Invalid {
                            option: spec.name.into(),
                            value: format!("{other:?}"),
                            reason: "expected a scalar".into(),
                        })
                    }
                };
                values.insert(spec.name, (check(spec, &text)?, Source::File));
            }
        }
        let mut seen = Named::default();
        for (k, v) in env {
            if let Some(rest) = k.strip_prefix("ANNAL_") {
                let flag = rest.to_ascii_lowercase().replace('_', "-");
                let spec = spec_by_flag(&flag).ok_or_else(|| ConfigError::Unknown(k.clone()))?;
                seen.note(spec, k, "in the environment")?;
                values.insert(spec.name, (check(spec, v)?, Source::Environment));
            }
        }
        for (spec, v) in cli {
            values.insert(spec.name, (v, Source::CommandLine));
        }
        let mut config = Config::from_values(values)?;
        let metrics_file = config.values.get("MetricsConfig").map(|(v, _)| v.clone()).unwrap_or_default();
        if !metrics_file.is_empty() {
            let text = read_file(&metrics_file)
                .map_err(|reason| ConfigError::File { path: metrics_file.clone(), reason })?;
            let groups = crate::metrics::Groups::parse(&text)
                .map_err(|reason| ConfigError::File { path: metrics_file.clone(), reason })?;
            if groups.legacy_meters {
                config.metrics_naming = crate::metrics::Naming::Legacy;
            }
            config.metrics_groups = groups;
        }
        Ok(config)
    }

    fn from_values(values: BTreeMap<&'static str, (String, Source)>) -> Result<Config, ConfigError> {
        let get = |n: &str| values.get(n).map(|(v, _)| v.clone()).unwrap_or_default();
        let flag = |n: &str| get(n) == "true";
        let int = |n: &str| get(n).parse::<u64>().unwrap_or(0);
        let db = PathBuf::from(get("Db"));
        let index = match get("Index") {
            s if s.is_empty() => db.join("index"),
            s => PathBuf::from(s),
        };
        let mut chunk_size = int("ChunkSize");
        if flag("MemDb") && values.get("ChunkSize").is_some_and(|(_, src)| *src == Source::Default) {
            // In memory, every chunk (and the one pre-allocated ahead) is resident: keep them small.
            chunk_size = MEM_DB_CHUNK_SIZE;
        }
        if !(crate::log::MIN_CHUNK_SIZE..=u32::MAX as u64).contains(&chunk_size) {
            return Err(ConfigError::Invalid {
                option: "ChunkSize".into(),
                value: chunk_size.to_string(),
                reason: format!("must be between {} and {}", crate::log::MIN_CHUNK_SIZE, u32::MAX),
            });
        }
        let http_port = u16::try_from(int("HttpPort")).map_err(|_| ConfigError::Invalid {
            option: "HttpPort".into(),
            value: get("HttpPort"),
            reason: "must be at most 65535".into(),
        })?;
        let http_ip: IpAddr = get("HttpIp").parse().map_err(|_| ConfigError::Invalid {
            option: "HttpIp".into(),
            value: get("HttpIp"),
            reason: "expected an IP address".into(),
        })?;
        let insecure = flag("Insecure");
        let tls = if insecure || get("CertificateFile").is_empty() {
            None
        } else {
            let reset = int("NodeConnectionResetIntervalMs");
            if reset < MIN_NODE_CONNECTION_RESET_MS {
                return Err(ConfigError::Invalid {
                    option: "NodeConnectionResetIntervalMs".into(),
                    value: reset.to_string(),
                    reason: format!("must be at least {MIN_NODE_CONNECTION_RESET_MS}"),
                });
            }
            Some(crate::tls::TlsSettings {
                paths: crate::tls::CertPaths {
                    certificate: PathBuf::from(get("CertificateFile")),
                    private_key: PathBuf::from(get("CertificatePrivateKeyFile")),
                    trusted_roots: PathBuf::from(get("TrustedRootCertificatesPath")),
                    reserved_cn: get("CertificateReservedNodeCommonName").trim().to_string(),
                    key_password: crate::tls::load::Password(get("CertificatePrivateKeyPassword")),
                    bundle_password: crate::tls::load::Password(get("CertificatePassword")),
                },
                peer_reset: Duration::from_millis(reset),
            })
        };
        if tls.is_none() && !http_ip.is_loopback() && !insecure {
            return Err(ConfigError::Conflict(format!(
                "refusing to serve plain HTTP on {http_ip}, which is not a loopback address: set CertificateFile (with CertificatePrivateKeyFile and TrustedRootCertificatesPath) for TLS, or pass --insecure to allow plain HTTP"
            )));
        }
        let run_projections = match get("RunProjections").as_str() {
            "All" => RunProjections::All,
            "System" => RunProjections::System,
            _ => RunProjections::None,
        };
        let max_event_bytes = int("MaxEventSize") as usize;
        if max_event_bytes == 0 {
            return Err(ConfigError::Invalid {
                option: "MaxEventSize".into(),
                value: "0".into(),
                reason: "must be positive".into(),
            });
        }
        let cluster = cluster_from_values(&values, http_ip, http_port)?;
        Ok(Config {
            cluster,
            db,
            index,
            mem_db: flag("MemDb"),
            chunk_size,
            max_event_bytes,
            max_append_bytes: int("MaxAppendSize").max(1) as usize,
            memtable_max: int("MemTableSize").max(1) as usize,
            max_index_tables: int("MaxIndexTables").max(1) as usize,
            worker_threads: int("WorkerThreads").min(1024) as usize,
            batch_scheduling: flag("BatchScheduling"),
            existence_filter_bytes: int("StreamExistenceFilterSize").max(8),
            stream_cache_capacity: int("StreamInfoCacheCapacity").max(1) as usize,
            http_ip,
            http_port,
            insecure,
            tls,
            enable_unix_socket: flag("EnableUnixSocket"),
            disable_admin_ui: flag("DisableAdminUi"),
            run_projections,
            start_standard_projections: flag("StartStandardProjections"),
            projections_query_expiry: Duration::from_secs(int("ProjectionsQueryExpiry").saturating_mul(60)),
            log_level: get("LogLevel"),
            log_json: get("LogFormat").eq_ignore_ascii_case("json"),
            shutdown_timeout: Duration::from_secs(int("ShutdownTimeout").clamp(1, 3600)),
            metrics_naming: if get("MetricsNaming").eq_ignore_ascii_case("legacy") {
                crate::metrics::Naming::Legacy
            } else {
                crate::metrics::Naming::Kurrent
            },
            metrics_groups: crate::metrics::Groups::default(),
            help: flag("Help"),
            version: flag("Version"),
            password_iterations: crate::auth::DEFAULT_PASSWORD_ITERATIONS,
            scavenge: crate::scavenge::ScavengeConfig {
                merge: !flag("DisableScavengeMerging"),
                history_max_age_days: int("ScavengeHistoryMaxAge"),
                page_size: (int("ScavengeBackendPageSize").max(1) as usize).saturating_mul(1024),
                hash_users_capacity: int("ScavengeHashUsersCacheCapacity") as usize,
                node_endpoint: String::new(),
            },
            values,
        })
    }

    /// Things allowed but probably not meant, one sentence each, for the node to log at start.
    pub fn warnings(&self) -> Vec<String> {
        let c = &self.cluster;
        let mut out = Vec::new();
        if c.cluster_size > 1 && c.cluster_size % 2 == 0 {
            out.push(format!(
                "ClusterSize {} is even: its quorum is {} nodes, so it survives no more failed nodes ({}) than a cluster of {}; an odd size is better",
                c.cluster_size,
                c.quorum(),
                c.cluster_size - c.quorum(),
                c.cluster_size - 1
            ));
        }
        if !c.is_cluster() && self.values.get("GossipSeed").is_some_and(|(v, _)| !v.is_empty()) {
            out.push("GossipSeed is set but ClusterSize is 1: the seeds are not used".into());
        }
        if self.insecure && self.values.get("CertificateFile").is_some_and(|(v, _)| !v.is_empty()) {
            out.push("Insecure is set: CertificateFile is ignored and the node serves plain HTTP".into());
        }
        if self.start_standard_projections && self.run_projections == RunProjections::None {
            out.push("StartStandardProjections is set but RunProjections is None: no projection runs".into());
        }
        if c.allow_surplus_nodes {
            out.push(
                "UnsafeAllowSurplusNodes is on: nodes beyond ClusterSize join as clones, and a clone that is promoted may lose acknowledged writes"
                    .into(),
            );
        }
        out
    }

    /// Defaults for tests and embedding: data under `db`, an ephemeral loopback port.
    pub fn for_dir(db: impl Into<PathBuf>) -> Config {
        let mut c = Config::parse(&[], &[], |_| Err("no file".into()))
            .unwrap_or_else(|e| unreachable!("defaults parse: {e}"));
        c.db = db.into();
        c.index = c.db.join("index");
        c.http_port = 0;
        c
    }

    /// HTTP worker threads on a machine with `cores` cores.
    pub fn worker_threads_for(&self, cores: usize) -> usize {
        if self.worker_threads > 0 {
            self.worker_threads
        } else {
            cores.saturating_sub(1).max(1)
        }
    }

    /// The store configuration this node configuration implies.
    pub fn store_config(&self) -> crate::store::StoreConfig {
        let mut s = crate::store::StoreConfig::new(&self.db);
        s.index_dir = self.index.clone();
        s.chunk_size = self.chunk_size;
        s.max_event_bytes = self.max_event_bytes;
        s.memtable_max = self.memtable_max;
        s.max_index_tables = self.max_index_tables;
        s.existence_filter_bytes = self.existence_filter_bytes;
        s.stream_cache_capacity = self.stream_cache_capacity;
        s.replicated = self.cluster.is_cluster();
        s.commit_timeout = self.cluster.commit_timeout;
        s
    }

    /// The users' settings.
    pub fn auth_config(&self) -> crate::auth::AuthConfig {
        crate::auth::AuthConfig { password_iterations: self.password_iterations }
    }

    /// The scavenger's settings, for a node serving at `node_endpoint`.
    pub fn scavenge_config(&self, node_endpoint: String) -> crate::scavenge::ScavengeConfig {
        crate::scavenge::ScavengeConfig { node_endpoint, ..self.scavenge.clone() }
    }

    /// `--help` text.
    pub fn help_text() -> String {
        let mut out = String::from(
            "annal: an event stream database speaking the EventStoreDB v5 HTTP dialect\n\n\
             Usage: annal [OPTIONS]\n\
             \x20      annal TOOL [ARGS] (each with --help): certs, backup, restore, redact,\n\
             \x20      healthcheck, cluster rolling-restart\n\n\
             Every option can also be set in the YAML file given by --config (key as shown) or by\n\
             the environment variable shown. Precedence: command line > environment > file > default.\n",
        );
        let mut group = "";
        for o in OPTIONS {
            if o.group != group {
                group = o.group;
                out.push_str(&format!("\n{group}:\n"));
            }
            let value = match o.kind {
                Kind::Bool => String::new(),
                Kind::Enum(v) => format!(" <{}>", v.join("|")),
                Kind::Int | Kind::SignedInt => " <N>".into(),
                Kind::Ip => " <IP>".into(),
                Kind::Endpoints => " <IP:PORT,...>".into(),
                Kind::Text => " <TEXT>".into(),
            };
            out.push_str(&format!(
                "  --{}{value}\n      {} [YAML {}; env {}",
                o.flag,
                o.help,
                o.name,
                env_var(o)
            ));
            if !o.default.is_empty() {
                out.push_str(&format!("; default {}", o.default));
            }
            out.push_str("]\n");
            if let Some(note) = o.alias_note() {
                out.push_str(&format!("      {note}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn precedence_and_names() {
        let env = vec![
            ("ANNAL_DISABLE_SCAVENGE_MERGING".to_string(), "true".to_string()),
            ("ANNAL_HTTP_PORT".into(), "3000".into()),
        ];
        let file = "HttpPort: 4000\nChunkSize: 8192\nDb: /tmp/x\n";
        let c = Config::parse(&args(&["--http-port", "5000", "--mem-db"]), &env, |_| Ok(file.into()));
        let c = c.unwrap();
        assert_eq!(c.http_port, 5000);
        assert_eq!(c.values["DisableScavengeMerging"].0, "true");
        assert!(c.mem_db);
        let c = Config::parse(&args(&["--config", "f.yaml"]), &env, |_| Ok(file.into())).unwrap();
        assert_eq!(c.http_port, 3000);
        assert_eq!(c.chunk_size, 8192);
        assert_eq!(c.index, PathBuf::from("/tmp/x/index"));
    }

    #[test]
    fn worker_threads_default_leaves_a_core() {
        let c = Config::for_dir("/tmp/x");
        assert_eq!(c.worker_threads, 0);
        assert_eq!(c.worker_threads_for(1), 1);
        assert_eq!(c.worker_threads_for(2), 1);
        assert_eq!(c.worker_threads_for(8), 7);
        let c = Config::parse(&args(&["--worker-threads", "3"]), &[], |_| Err("no file".into())).unwrap();
        assert_eq!(c.worker_threads_for(2), 3);
        assert!(Config::parse(&args(&["--worker-threads", "-1"]), &[], |_| Err("no file".into())).is_err());
    }

    #[test]
    fn bad_options_are_clear_errors() {
        let none = |_: &str| Err("x".to_string());
        assert!(matches!(Config::parse(&args(&["--nope"]), &[], none), Err(ConfigError::Unknown(_))));
        assert!(matches!(
            Config::parse(&args(&["--http-port", "x"]), &[], none),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            Config::parse(&args(&["--http-port", "70000"]), &[], none),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            Config::parse(&args(&["--http-ip", "0.0.0.0"]), &[], none),
            Err(ConfigError::Conflict(_))
        ));
        assert!(Config::parse(&args(&["--http-ip", "0.0.0.0", "--insecure"]), &[], none).is_ok());
        assert!(matches!(
            Config::parse(&args(&["--run-projections", "Some"]), &[], none),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(Config::parse(&args(&["--config", "a"]), &[], none), Err(ConfigError::File { .. })));
        assert!(Config::help_text().contains("--disable-scavenge-merging"));
    }

    fn no_file(_: &str) -> Result<String, String> {
        Err("no file".into())
    }

    fn parse_cli(a: &[&str]) -> Result<Config, ConfigError> {
        Config::parse(&args(a), &[], no_file)
    }

    fn conflict(a: &[&str]) -> String {
        match parse_cli(a) {
            Err(ConfigError::Conflict(m)) => m,
            other => panic!("{a:?}: expected a conflict, got {other:?}"),
        }
    }

    fn invalid(a: &[&str]) -> String {
        match parse_cli(a) {
            Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
            other => panic!("{a:?}: expected an invalid value, got {other:?}"),
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// A value other than the default for every cluster option (normalised as stored), valid in
    /// a three-node cluster.
    const CLUSTER_SAMPLES: &[(&str, &str)] = &[
        ("ClusterSize", "5"),
        ("NodePriority", "-3"),
        ("GossipSeed", "10.0.0.3:1113,10.0.0.4:1114"),
        ("ReplicationIp", "10.0.0.1"),
        ("ReplicationPort", "3112"),
        ("ReadOnlyReplica", "true"),
        ("CommitTimeoutMs", "2500"),
        ("PrepareTimeoutMs", "2600"),
        ("GossipIntervalMs", "2000"),
        ("GossipTimeoutMs", "2700"),
        ("GossipAllowedDifferenceMs", "1000"),
        ("LeaderElectionTimeoutMs", "1500"),
        ("ReplicationHeartbeatInterval", "800"),
        ("ReplicationHeartbeatTimeout", "900"),
        ("DeadMemberRemovalPeriodSec", "60"),
        ("UnsafeAllowSurplusNodes", "true"),
        ("MaxTruncation", "-1"),
        ("ReplicationHostAdvertiseAs", "node1.annal.example"),
        ("ReplicationTcpPortAdvertiseAs", "3112"),
        ("NodeHostAdvertiseAs", "10.1.0.1"),
        ("NodePortAdvertiseAs", "3113"),
    ];

    #[test]
    fn cluster_defaults() {
        let c = Config::for_dir("/tmp/x");
        let expected = ClusterConfig {
            cluster_size: 1,
            node_priority: 0,
            gossip_seeds: vec![],
            replication_addr: addr("127.0.0.1:1112"),
            read_only_replica: false,
            commit_timeout: Duration::from_millis(2000),
            prepare_timeout: Duration::from_millis(2000),
            gossip_interval: Duration::from_millis(1000),
            gossip_timeout: Duration::from_millis(500),
            gossip_allowed_difference: Duration::from_millis(60000),
            election_timeout: Duration::from_millis(1000),
            heartbeat_interval: Duration::from_millis(700),
            heartbeat_timeout: Duration::from_millis(700),
            dead_member_removal: Duration::from_secs(1800),
            allow_surplus_nodes: false,
            max_truncation: Some(268435456),
            transport: crate::tls::peer::Transport::Plain,
            dns: None,
            advertise_replication: Advertise::default(),
            advertise_http: Advertise::default(),
        };
        assert_eq!(c.cluster, expected);
        assert_eq!(c.cluster.quorum(), 1);
        assert!(!c.cluster.is_cluster());
        assert_eq!(c.warnings(), Vec::<String>::new());
        for (name, _) in CLUSTER_SAMPLES {
            assert_eq!(c.values[name].1, Source::Default, "{name}");
        }
        assert_eq!(c.values["DiscoverViaDns"], ("false".to_string(), Source::Default));
    }

    #[test]
    fn every_cluster_option_through_every_source() {
        let sampled: Vec<&str> = CLUSTER_SAMPLES.iter().map(|(n, _)| *n).collect();
        for o in OPTIONS.iter().filter(|o| o.group == "Cluster") {
            // DNS discovery's three options act together (`dns_discovery_and_advertised_addresses`).
            let untestable =
                ["GossipOnSingleNode", "DiscoverViaDns", "ClusterDns", "ClusterGossipPort"].contains(&o.name);
            assert!(untestable || sampled.contains(&o.name), "{} has no sample", o.name);
        }
        for (name, value) in CLUSTER_SAMPLES {
            let spec = spec_by_name(name).unwrap();
            assert_eq!(spec.group, "Cluster");
            assert_ne!(spec.default, *value, "{name}: the sample must differ from the default");
            // The rest of a valid three-node cluster, from the command line (a single node for
            // the seeds, which a single node may be given).
            let mut base = vec![];
            if !["ClusterSize", "GossipSeed"].contains(name) {
                base.extend(["--cluster-size", "3"]);
            }
            if *name != "GossipSeed" {
                base.extend(["--gossip-seed", "10.0.0.2:1112"]);
            }
            let base_cluster = Config::parse(&args(&base), &[], no_file).unwrap().cluster;
            let names: Vec<&str> = std::iter::once(spec.name).chain(spec.aliases.iter().copied()).collect();
            for n in names {
                let flag = format!("--{}", flag_of(n));
                let mut a = base.clone();
                a.extend([flag.as_str(), value]);
                let c = parse_cli(&a).unwrap_or_else(|e| panic!("{flag} {value}: {e}"));
                assert_eq!(c.values[spec.name], (value.to_string(), Source::CommandLine), "{flag}");
                assert_ne!(c.cluster, base_cluster, "{flag} changes the typed section");

                let var = env_of_flag(&flag_of(n));
                let c = Config::parse(&args(&base), &[(var.clone(), value.to_string())], no_file)
                    .unwrap_or_else(|e| panic!("{var}={value}: {e}"));
                assert_eq!(c.values[spec.name], (value.to_string(), Source::Environment), "{var}");

                let yaml = format!("{n}: {value}\n");
                let mut a = base.clone();
                a.extend(["--config", "f.yaml"]);
                let c = Config::parse(&args(&a), &[], |_| Ok(yaml.clone()))
                    .unwrap_or_else(|e| panic!("YAML {yaml:?}: {e}"));
                assert_eq!(c.values[spec.name], (value.to_string(), Source::File), "YAML {n}");
            }
        }
    }

    #[test]
    fn projection_options_through_every_source() {
        let c = Config::parse(&[], &[], no_file).unwrap();
        assert_eq!((c.run_projections, c.start_standard_projections), (RunProjections::None, false));
        let typed = |c: &Config| (c.run_projections, c.start_standard_projections);
        let want = (RunProjections::System, true);
        let c = parse_cli(&["--run-projections", "system", "--start-standard-projections"]).unwrap();
        assert_eq!(typed(&c), want);
        assert_eq!(c.values["RunProjections"], ("System".to_string(), Source::CommandLine));
        let vars = [
            ("ANNAL_RUN_PROJECTIONS".to_string(), "System".to_string()),
            ("ANNAL_START_STANDARD_PROJECTIONS".to_string(), "true".to_string()),
        ];
        let c = Config::parse(&[], &vars, no_file).unwrap();
        assert_eq!(typed(&c), want);
        assert_eq!(c.values["StartStandardProjections"], ("true".to_string(), Source::Environment));
        let yaml = "RunProjections: All\nStartStandardProjections: true\n".to_string();
        let c = Config::parse(&args(&["--config", "f.yaml"]), &[], |_| Ok(yaml.clone())).unwrap();
        assert_eq!(typed(&c), (RunProjections::All, true));
        assert_eq!(c.values["RunProjections"], ("All".to_string(), Source::File));
        let c = parse_cli(&["--start-standard-projections"]).unwrap();
        assert!(c.warnings().iter().any(|w| w.contains("RunProjections is None")), "{:?}", c.warnings());
        assert!(parse_cli(&["--start-standard-projections", "maybe"]).is_err());
    }

    #[test]
    fn projections_query_expiry_through_every_source() {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        let c = Config::parse(&[], &[], no_file).unwrap();
        assert_eq!(c.projections_query_expiry, minutes(5));
        assert_eq!(c.values["ProjectionsQueryExpiry"], ("5".to_string(), Source::Default));
        let c = parse_cli(&["--projections-query-expiry", "2"]).unwrap();
        assert_eq!(c.projections_query_expiry, minutes(2));
        assert_eq!(c.values["ProjectionsQueryExpiry"], ("2".to_string(), Source::CommandLine));
        let vars = [("ANNAL_PROJECTIONS_QUERY_EXPIRY".to_string(), "7".to_string())];
        let c = Config::parse(&[], &vars, no_file).unwrap();
        assert_eq!(c.projections_query_expiry, minutes(7));
        let yaml = "ProjectionsQueryExpiry: 11\n".to_string();
        let c = Config::parse(&args(&["--config", "f.yaml"]), &[], |_| Ok(yaml.clone())).unwrap();
        assert_eq!(c.projections_query_expiry, minutes(11));
        assert_eq!(c.values["ProjectionsQueryExpiry"], ("11".to_string(), Source::File));
        for bad in ["-1", "soon", "1.5"] {
            assert!(parse_cli(&["--projections-query-expiry", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn cluster_options_fill_the_typed_section() {
        let c = parse_cli(&[
            "--cluster-size=5",
            "--node-priority",
            "-3",
            "--gossip-seed",
            " 10.0.0.2:1112 , [fd00::3]:1113,10.0.0.2:1112",
            "--replication-ip",
            "10.0.0.1",
            "--replication-port",
            "3112",
            "--read-only-replica",
            "--commit-timeout-ms",
            "2500",
            "--prepare-timeout-ms",
            "2600",
            "--gossip-interval-ms",
            "2000",
            "--gossip-timeout-ms",
            "2700",
            "--gossip-allowed-difference-ms",
            "0",
            "--leader-election-timeout-ms",
            "100",
            "--replication-heartbeat-interval",
            "800",
            "--replication-heartbeat-timeout",
            "900",
            "--dead-member-removal-period-sec",
            "60",
            "--unsafe-allow-surplus-nodes",
            "true",
            "--max-truncation=0",
        ])
        .unwrap();
        assert_eq!(
            c.cluster,
            ClusterConfig {
                cluster_size: 5,
                node_priority: -3,
                gossip_seeds: vec![addr("10.0.0.2:1112"), addr("[fd00::3]:1113")],
                replication_addr: addr("10.0.0.1:3112"),
                read_only_replica: true,
                commit_timeout: Duration::from_millis(2500),
                prepare_timeout: Duration::from_millis(2600),
                gossip_interval: Duration::from_millis(2000),
                gossip_timeout: Duration::from_millis(2700),
                gossip_allowed_difference: Duration::ZERO,
                election_timeout: Duration::from_millis(100),
                heartbeat_interval: Duration::from_millis(800),
                heartbeat_timeout: Duration::from_millis(900),
                dead_member_removal: Duration::from_secs(60),
                allow_surplus_nodes: true,
                max_truncation: Some(0),
                transport: crate::tls::peer::Transport::Plain,
                dns: None,
                advertise_replication: Advertise::default(),
                advertise_http: Advertise::default(),
            }
        );
        assert_eq!(c.values["GossipSeed"].0, "10.0.0.2:1112,[fd00::3]:1113,10.0.0.2:1112");
        assert_eq!(c.cluster.quorum(), 3);
        assert!(c.cluster.is_cluster());
        assert_eq!(parse_cli(&["--max-truncation", "-1"]).unwrap().cluster.max_truncation, None);

        // The v5 names in a YAML file, the seeds as a YAML sequence.
        let file = "ClusterSize: 3\nIntIp: 10.0.0.1\nIntTcpPort: 1113\nIntTcpHeartbeatInterval: 300\n\
                    IntTcpHeartbeatTimeout: 400\nGossipSeed:\n  - 10.0.0.2:1113\n  - 10.0.0.3:1113\n";
        let c = Config::parse(&args(&["--config", "f.yaml"]), &[], |_| Ok(file.into())).unwrap();
        assert_eq!(c.cluster.replication_addr, addr("10.0.0.1:1113"));
        assert_eq!(c.cluster.heartbeat_interval, Duration::from_millis(300));
        assert_eq!(c.cluster.heartbeat_timeout, Duration::from_millis(400));
        assert_eq!(c.cluster.gossip_seeds, vec![addr("10.0.0.2:1113"), addr("10.0.0.3:1113")]);
        assert_eq!(c.values["ReplicationPort"], ("1113".to_string(), Source::File));
    }

    #[test]
    fn cluster_option_precedence_across_names() {
        let file = "IntTcpPort: 4000\nReplicationHeartbeatTimeout: 900\n";
        let env = vec![("ANNAL_INT_TCP_PORT".to_string(), "5000".to_string())];
        let parse = |a: &[&str], env: &[(String, String)]| {
            Config::parse(&args(a), env, |_| Ok(file.to_string())).unwrap().cluster
        };
        let cfg = ["--config", "f.yaml"];
        assert_eq!(parse(&cfg, &[]).replication_addr.port(), 4000);
        assert_eq!(parse(&cfg, &env).replication_addr.port(), 5000);
        let cli = parse(&["--config", "f.yaml", "--replication-port", "6000"], &env);
        assert_eq!(cli.replication_addr.port(), 6000);
        let alias_env = vec![("ANNAL_INT_TCP_HEARTBEAT_TIMEOUT".to_string(), "1200".to_string())];
        assert_eq!(parse(&cfg, &alias_env).heartbeat_timeout, Duration::from_millis(1200));
        // On the command line the last flag wins, whichever name it uses.
        let last = parse(&["--replication-port", "7001", "--int-tcp-port", "7000"], &[]);
        assert_eq!(last.replication_addr.port(), 7000);
        let last = parse(&["--int-tcp-port", "7000", "--ReplicationPort", "7001"], &[]);
        assert_eq!(last.replication_addr.port(), 7001);
        // Within the environment or the file, two names for one option are refused.
        let both = vec![
            ("ANNAL_REPLICATION_PORT".to_string(), "5000".to_string()),
            ("ANNAL_INT_TCP_PORT".to_string(), "5001".to_string()),
        ];
        assert_eq!(
            Config::parse(&[], &both, no_file).unwrap_err(),
            ConfigError::Conflict(
                "ReplicationPort is given twice in the environment, as ANNAL_REPLICATION_PORT and as ANNAL_INT_TCP_PORT: keep one"
                    .into()
            )
        );
        let twice = "ReplicationIp: 10.0.0.1\nIntIp: 10.0.0.2\n";
        assert_eq!(
            Config::parse(&args(&cfg), &[], |_| Ok(twice.into())).unwrap_err(),
            ConfigError::Conflict(
                "ReplicationIp is given twice in f.yaml, as ReplicationIp and as IntIp: keep one".into()
            )
        );
    }

    #[test]
    fn refused_cluster_combinations() {
        assert_eq!(
            conflict(&["--cluster-size", "0"]),
            "ClusterSize 0: a cluster has at least 1 node (1 for a single node)"
        );
        assert_eq!(
            conflict(&["--cluster-size", "3"]),
            "ClusterSize is 3 but GossipSeed is empty: list the other nodes' replication endpoints (ip:port, comma-separated), or find them through DNS (DiscoverViaDns with ClusterDns)"
        );
        assert_eq!(
            conflict(&["--cluster-size", "3", "--gossip-seed", "127.0.0.1:1112"]),
            "GossipSeed names only this node's own replication endpoint 127.0.0.1:1112: list the other nodes' replication endpoints (ip:port, comma-separated)"
        );
        let any = ["--cluster-size", "3", "--replication-ip", "0.0.0.0", "--gossip-seed", "127.0.0.1:1113"];
        assert!(conflict(&any)
            .starts_with("ReplicationIp 0.0.0.0 and ReplicationPort 1112: a cluster node names itself"));
        assert!(parse_cli(&["--cluster-size", "3", "--gossip-seed", "127.0.0.1:1113"]).is_ok());
        assert_eq!(
            conflict(&["--read-only-replica"]),
            "ReadOnlyReplica needs a cluster to follow: set ClusterSize to the number of voting nodes (above 1) and GossipSeed to their replication endpoints"
        );
        assert_eq!(
            conflict(&["--replication-port", "2113"]),
            "ReplicationPort 2113 on 127.0.0.1 is also the HttpPort on 127.0.0.1: the replication and HTTP listeners need different ports"
        );
        assert_eq!(
            conflict(&["--replication-ip", "0.0.0.0", "--int-tcp-port", "2113"]),
            "ReplicationPort 2113 on 0.0.0.0 is also the HttpPort on 127.0.0.1: the replication and HTTP listeners need different ports"
        );
        let all = [
            "--http-ip",
            "0.0.0.0",
            "--insecure",
            "--replication-ip",
            "10.0.0.1",
            "--replication-port",
            "2113",
        ];
        assert!(
            conflict(&all).starts_with("ReplicationPort 2113 on 10.0.0.1 is also the HttpPort on 0.0.0.0")
        );
        assert!(parse_cli(&["--replication-ip", "10.0.0.1", "--replication-port", "2113"]).is_ok());
        assert!(parse_cli(&["--http-port", "0", "--replication-port", "0"]).is_ok());
        assert_eq!(
            conflict(&["--discover-via-dns"]),
            "DiscoverViaDns is on but ClusterDns is empty: name the DNS name whose addresses are the cluster's nodes"
        );
        assert!(parse_cli(&["--discover-via-dns", "false"]).is_ok());
    }

    #[test]
    fn dns_discovery_and_advertised_addresses() {
        // A Kubernetes member: listens everywhere, names itself by its pod's DNS name, finds the
        // others through the headless Service, with no GossipSeed.
        let pod = [
            "--cluster-size",
            "3",
            "--replication-ip",
            "0.0.0.0",
            "--http-ip",
            "0.0.0.0",
            "--insecure",
            "--discover-via-dns",
            "--cluster-dns",
            "annal.db.svc.cluster.local",
            "--replication-host-advertise-as",
            "annal-0.annal.db.svc.cluster.local",
        ];
        let c = parse_cli(&pod).unwrap().cluster;
        assert_eq!(c.dns, Some(DnsDiscovery { name: "annal.db.svc.cluster.local".into(), port: 1112 }));
        assert!(c.gossip_seeds.is_empty());
        assert_eq!(c.advertise_replication.host.as_deref(), Some("annal-0.annal.db.svc.cluster.local"));
        assert_eq!(c.advertise_replication.port, None);
        assert_eq!(c.advertise_http, Advertise::default());
        let mut other_port = pod.to_vec();
        other_port.extend(["--cluster-gossip-port", "3112"]);
        assert_eq!(parse_cli(&other_port).unwrap().cluster.dns.unwrap().port, 3112);
        // The variables a StatefulSet sets, with the options' v5 names among them.
        let vars = [
            ("ANNAL_CLUSTER_SIZE", "3"),
            ("ANNAL_DISCOVER_VIA_DNS", "true"),
            ("ANNAL_CLUSTER_DNS", "annal"),
            ("ANNAL_INT_IP", "0.0.0.0"),
            ("ANNAL_INT_IP_ADVERTISE_AS", "10.2.0.7"),
            ("ANNAL_EXT_IP_ADVERTISE_AS", "annal-0.annal"),
        ];
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let c = Config::parse(&[], &vars, no_file).unwrap().cluster;
        assert_eq!(c.dns.unwrap().name, "annal");
        assert_eq!(c.advertise_replication.host.as_deref(), Some("10.2.0.7"));
        assert_eq!(c.advertise_http.host.as_deref(), Some("annal-0.annal"));
        // Without an advertised address, 0.0.0.0 cannot name the node.
        assert!(conflict(&pod[..pod.len() - 2]).contains("not 0.0.0.0 unless ReplicationHostAdvertiseAs"));
        // A DNS name is checked as one.
        assert_eq!(
            invalid(&["--cluster-dns", "annal cluster"]),
            "invalid value \"annal cluster\" for ClusterDns: expected an IP address or a DNS name (letters, digits, '-' and '.')"
        );
        assert!(invalid(&["--node-host-advertise-as", "-x.example"]).contains("for NodeHostAdvertiseAs"));
        assert!(invalid(&["--cluster-gossip-port", "70000"]).contains("must be at most 65535"));
        assert!(parse_cli(&["--cluster-dns", "annal.", "--node-host-advertise-as", "fd00::1"]).is_ok());
    }

    #[test]
    fn malformed_cluster_values() {
        assert_eq!(
            invalid(&["--gossip-seed", "10.0.0.2:1112,nope"]),
            "invalid value \"10.0.0.2:1112,nope\" for GossipSeed: entry \"nope\" is not an ip:port endpoint (such as 10.0.0.2:1112 or [fd00::2]:1112)"
        );
        assert!(
            invalid(&["--gossip-seed", "10.0.0.2"]).contains("entry \"10.0.0.2\" is not an ip:port endpoint")
        );
        assert!(invalid(&["--gossip-seed", "10.0.0.2:1112,,10.0.0.3:1112"]).contains("entry \"\""));
        assert!(
            invalid(&["--gossip-seed", "0.0.0.0:1112"]).contains("entry \"0.0.0.0:1112\" is not a reachable")
        );
        assert!(invalid(&["--gossip-seed", "10.0.0.2:0"]).contains("entry \"10.0.0.2:0\" is not a reachable"));
        let yaml = "GossipSeed: [10.0.0.2:1112, 7]\n";
        assert!(matches!(
            Config::parse(&args(&["--config", "f"]), &[], |_| Ok(yaml.into())),
            Err(ConfigError::Invalid { .. })
        ));
        assert_eq!(
            invalid(&["--leader-election-timeout-ms", "99"]),
            "invalid value \"99\" for LeaderElectionTimeoutMs: must be at least 100 milliseconds"
        );
        assert_eq!(
            invalid(&["--max-truncation", "-2"]),
            "invalid value \"-2\" for MaxTruncation: expected -1 (no limit) or a number of bytes"
        );
        assert!(invalid(&["--cluster-size", "-1"]).contains("expected a non-negative integer"));
        assert!(invalid(&["--node-priority", "high"]).contains("expected an integer"));
        assert!(invalid(&["--replication-port", "70000"]).contains("must be at most 65535"));
        assert!(invalid(&["--int-ip", "host"]).contains("for ReplicationIp: expected an IP address"));
        for flag in [
            "--commit-timeout-ms",
            "--prepare-timeout-ms",
            "--gossip-interval-ms",
            "--gossip-timeout-ms",
            "--replication-heartbeat-interval",
            "--int-tcp-heartbeat-timeout",
        ] {
            assert!(invalid(&[flag, "0"]).ends_with("must be at least 1 millisecond"), "{flag}");
        }
        assert_eq!(parse_cli(&["--node-priority", "-7"]).unwrap().cluster.node_priority, -7);
    }

    #[test]
    fn gossip_seeds_drop_repeats_and_this_node() {
        let c = parse_cli(&[
            "--cluster-size",
            "3",
            "--gossip-seed",
            "127.0.0.1:1112,10.0.0.2:1112,10.0.0.2:1112",
        ])
        .unwrap();
        assert_eq!(c.cluster.gossip_seeds, vec![addr("10.0.0.2:1112")]);
        assert!(c.cluster.names_this_node(addr("127.0.0.1:1112")));
        assert!(!c.cluster.names_this_node(addr("10.0.0.2:1112")));
    }

    #[test]
    fn even_cluster_size_and_other_warnings() {
        let sizes: Vec<usize> = (1..=6)
            .map(|n| ClusterConfig { cluster_size: n, ..Config::for_dir("/tmp/x").cluster }.quorum())
            .collect();
        assert_eq!(sizes, vec![1, 2, 2, 3, 3, 4]);
        let c = parse_cli(&["--cluster-size", "4", "--gossip-seed", "10.0.0.2:1112"]).unwrap();
        assert_eq!(
            c.warnings(),
            vec!["ClusterSize 4 is even: its quorum is 3 nodes, so it survives no more failed nodes (1) than a cluster of 3; an odd size is better".to_string()]
        );
        let c = parse_cli(&["--cluster-size", "3", "--gossip-seed", "10.0.0.2:1112"]).unwrap();
        assert_eq!(c.warnings(), Vec::<String>::new());
        let c = parse_cli(&["--gossip-seed", "10.0.0.2:1112"]).unwrap();
        assert_eq!(
            c.warnings(),
            vec!["GossipSeed is set but ClusterSize is 1: the seeds are not used".to_string()]
        );
        let c = parse_cli(&["--unsafe-allow-surplus-nodes"]).unwrap();
        assert_eq!(c.warnings().len(), 1);
        assert!(c.warnings()[0].starts_with("UnsafeAllowSurplusNodes is on"));
    }

    #[test]
    fn alias_forms_are_derived_and_shown() {
        assert_eq!(flag_of("IntTcpHeartbeatInterval"), "int-tcp-heartbeat-interval");
        for o in OPTIONS {
            assert_eq!(flag_of(o.name), o.flag, "the flag of {} follows its name", o.name);
        }
        let spec = spec_by_name("ReplicationIp").unwrap();
        assert_eq!(spec.alias_flags(), vec!["int-ip"]);
        assert_eq!(spec.alias_env_vars(), vec!["ANNAL_INT_IP"]);
        assert_eq!(spec.alias_note().as_deref(), Some("Also accepted as IntIp (--int-ip, ANNAL_INT_IP)."));
        assert_eq!(spec_by_name("ClusterSize").unwrap().alias_note(), None);
        // No name, alias or flag means two options.
        let mut all: Vec<String> = OPTIONS
            .iter()
            .flat_map(|o| std::iter::once(o.name).chain(o.aliases.iter().copied()))
            .map(|n| n.to_ascii_lowercase())
            .collect();
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count);
        let help = Config::help_text();
        assert!(help.contains("--replication-ip <IP>\n"), "{help}");
        assert!(help.contains("Also accepted as IntTcpPort (--int-tcp-port, ANNAL_INT_TCP_PORT)."));
        assert!(help.contains("--gossip-seed <IP:PORT,...>\n"));
        assert!(help.contains("at least 100"));
        assert_eq!(help.matches("\nCluster:\n").count(), 1, "the cluster options are listed together");
    }
}
