//! The option table: every server option's name, flag, aliases, group, type, default and help
//! ([`OPTIONS`]), and the names derived from it (flags, environment variables, aliases). Parsing
//! and the typed configuration are in the parent module.

/// The value type of an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true`/`false`; a bare flag means true.
    Bool,
    /// A non-negative integer.
    Int,
    /// An integer that may be negative.
    SignedInt,
    /// Free text or a path.
    Text,
    /// An IP address.
    Ip,
    /// A comma-separated list of `ip:port` endpoints (in YAML also a sequence); may be empty.
    Endpoints,
    /// One of a fixed set (case-insensitive).
    Enum(&'static [&'static str]),
}

/// One server option.
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    /// YAML key and `/info/options` name.
    pub name: &'static str,
    /// Command-line flag without the dashes.
    pub flag: &'static str,
    /// Other names accepted for the option (PascalCase, as EventStoreDB's other versions name
    /// it); each gets a flag, an environment variable and a YAML key derived like the main name's
    /// (see [`flag_of`]).
    pub aliases: &'static [&'static str],
    /// Group shown in `--help` and `/info/options`.
    pub group: &'static str,
    /// Value type.
    pub kind: Kind,
    /// Default as text ("" for none).
    pub default: &'static str,
    /// One-line description.
    pub help: &'static str,
}

const PROJECTIONS: &[&str] = &["None", "System", "All"];
/// Options whose values are secrets: `/info/options` shows `****` for them when they are set.
pub const SENSITIVE_OPTIONS: &[&str] = &["CertificatePassword", "CertificatePrivateKeyPassword"];
/// Default chunk size with `--mem-db`.
pub const MEM_DB_CHUNK_SIZE: u64 = 16 * 1024 * 1024;

/// Every option the node understands.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "Help",
        flag: "help",
        aliases: &[],
        group: "Application",
        kind: Kind::Bool,
        default: "false",
        help: "Show this help and exit.",
    },
    OptionSpec {
        name: "Version",
        flag: "version",
        aliases: &[],
        group: "Application",
        kind: Kind::Bool,
        default: "false",
        help: "Show the version and exit.",
    },
    OptionSpec {
        name: "Config",
        flag: "config",
        aliases: &[],
        group: "Application",
        kind: Kind::Text,
        default: "",
        help: "YAML file with options (keys as in this table).",
    },
    OptionSpec {
        name: "LogLevel",
        flag: "log-level",
        aliases: &[],
        group: "Application",
        kind: Kind::Enum(&["Error", "Warn", "Info", "Debug", "Trace"]),
        default: "Info",
        help: "Lowest level of log messages written to stderr.",
    },
    OptionSpec {
        name: "LogFormat",
        flag: "log-format",
        aliases: &[],
        group: "Application",
        kind: Kind::Enum(&["Text", "Json"]),
        default: "Text",
        help: "Format of the log on stderr: lines for people, or one JSON object per line.",
    },
    OptionSpec {
        name: "MetricsNaming",
        flag: "metrics-naming",
        aliases: &[],
        group: "Application",
        kind: Kind::Enum(&["KurrentDB", "Legacy"]),
        default: "KurrentDB",
        help: "Metric names on /metrics: KurrentDB's (kurrentdb_*), or EventStoreDB 23.10/24.10's (eventstore_*, counters without _total).",
    },
    OptionSpec {
        name: "MetricsConfig",
        flag: "metrics-config",
        aliases: &[],
        group: "Application",
        kind: Kind::Text,
        default: "",
        help: "metricsconfig.json file switching metric groups on and off (default: every group on).",
    },
    OptionSpec {
        name: "ShutdownTimeout",
        flag: "shutdown-timeout",
        aliases: &[],
        group: "Application",
        kind: Kind::Int,
        default: "25",
        help: "Seconds a shutdown (SIGTERM, POST /admin/shutdown) may take, the leader's hand-over included, before the process exits anyway (fits Kubernetes' 30 s grace period).",
    },
    OptionSpec {
        name: "Db",
        flag: "db",
        aliases: &[],
        group: "Database",
        kind: Kind::Text,
        default: "./data",
        help: "Directory of the transaction log (chunk files and checkpoints).",
    },
    OptionSpec {
        name: "Index",
        flag: "index",
        aliases: &[],
        group: "Database",
        kind: Kind::Text,
        default: "",
        help: "Directory of the index (default: <db>/index).",
    },
    OptionSpec {
        name: "MemDb",
        flag: "mem-db",
        aliases: &[],
        group: "Database",
        kind: Kind::Bool,
        default: "false",
        help: "Keep the database in memory only (lost on exit); chunks default to 16 MiB then.",
    },
    OptionSpec {
        name: "ChunkSize",
        flag: "chunk-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "268435456",
        help: "Data bytes per chunk file (fixed when the database is created).",
    },
    OptionSpec {
        name: "MaxEventSize",
        flag: "max-event-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "16777216",
        help: "Largest event (data plus metadata) accepted, in bytes.",
    },
    OptionSpec {
        name: "MaxAppendSize",
        flag: "max-append-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "33554432",
        help: "Largest HTTP append request body accepted, in bytes.",
    },
    OptionSpec {
        name: "MemTableSize",
        flag: "mem-table-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "1000000",
        help: "Index entries held in memory before they are written to an index table.",
    },
    OptionSpec {
        name: "WorkerThreads",
        flag: "worker-threads",
        aliases: &[],
        group: "Application",
        kind: Kind::Int,
        default: "0",
        help: "Threads serving HTTP; 0: one less than the cores (at least 1), so group commits and reads on their own threads keep a core.",
    },
    OptionSpec {
        name: "BatchScheduling",
        flag: "batch-scheduling",
        aliases: &[],
        group: "Application",
        kind: Kind::Bool,
        default: "true",
        help: "Run the node's threads under the Linux SCHED_BATCH policy: a thread that wakes does not preempt the node's running threads, so a busy machine spends its time on work rather than on context switches (false: the default policy).",
    },
    OptionSpec {
        name: "MaxIndexTables",
        flag: "max-index-tables",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "4",
        help: "Index tables allowed before they are merged in the background.",
    },
    OptionSpec {
        name: "StreamExistenceFilterSize",
        flag: "stream-existence-filter-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "16777216",
        help: "Size in bytes of the stream existence bloom filter.",
    },
    OptionSpec {
        name: "StreamInfoCacheCapacity",
        flag: "stream-info-cache-capacity",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "100000",
        help: "Streams whose state is kept in memory.",
    },
    OptionSpec {
        name: "DisableScavengeMerging",
        flag: "disable-scavenge-merging",
        aliases: &[],
        group: "Database",
        kind: Kind::Bool,
        default: "false",
        help: "Do not merge small scavenged chunks.",
    },
    OptionSpec {
        name: "ScavengeHistoryMaxAge",
        flag: "scavenge-history-max-age",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "30",
        help: "Days to keep scavenge history streams.",
    },
    OptionSpec {
        name: "AlwaysKeepScavenged",
        flag: "always-keep-scavenged",
        aliases: &[],
        group: "Database",
        kind: Kind::Bool,
        default: "false",
        help: "Deprecated: always keep the newer chunk of a scavenge.",
    },
    OptionSpec {
        name: "ScavengeBackendPageSize",
        flag: "scavenge-backend-page-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "16",
        help: "Page size of the scavenge database, in KiB.",
    },
    OptionSpec {
        name: "ScavengeBackendCacheSize",
        flag: "scavenge-backend-cache-size",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "67108864",
        help: "Cache of the scavenge database, in bytes.",
    },
    OptionSpec {
        name: "ScavengeHashUsersCacheCapacity",
        flag: "scavenge-hash-users-cache-capacity",
        aliases: &[],
        group: "Database",
        kind: Kind::Int,
        default: "100000",
        help: "Stream hashes remembered for collision checks during scavenge accumulation.",
    },
    OptionSpec {
        name: "HttpIp",
        flag: "http-ip",
        aliases: &[],
        group: "Interface",
        kind: Kind::Ip,
        default: "127.0.0.1",
        help: "Address the HTTP API listens on.",
    },
    OptionSpec {
        name: "HttpPort",
        flag: "http-port",
        aliases: &[],
        group: "Interface",
        kind: Kind::Int,
        default: "2113",
        help: "Port of the HTTP API (0 picks a free port).",
    },
    OptionSpec {
        name: "Insecure",
        flag: "insecure",
        aliases: &[],
        group: "Interface",
        kind: Kind::Bool,
        default: "false",
        help: "Serve plain HTTP and plain node-to-node traffic, without TLS (the only mode without a CertificateFile; allowed on a non-loopback address only with this flag).",
    },
    OptionSpec {
        name: "CertificateFile",
        flag: "certificate-file",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Text,
        default: "",
        help: "The node certificate (PEM, followed by any intermediates; or one DER certificate; or, without CertificatePrivateKeyFile, a PKCS #12 bundle holding the key). Setting it turns TLS on for the HTTP API and between nodes.",
    },
    OptionSpec {
        name: "CertificatePrivateKeyFile",
        flag: "certificate-private-key-file",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Text,
        default: "",
        help: "The node certificate's private key (PEM: PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY, or ENCRYPTED PRIVATE KEY with CertificatePrivateKeyPassword).",
    },
    OptionSpec {
        name: "CertificatePrivateKeyPassword",
        flag: "certificate-private-key-password",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Text,
        default: "",
        help: "Password of an encrypted private key file (PKCS #8, PBES2). Never shown by /info/options.",
    },
    OptionSpec {
        name: "CertificatePassword",
        flag: "certificate-password",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Text,
        default: "",
        help: "Password of a PKCS #12 certificate file. Never shown by /info/options.",
    },
    OptionSpec {
        name: "TrustedRootCertificatesPath",
        flag: "trusted-root-certificates-path",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Text,
        default: "/etc/ssl/certs",
        help: "Directory of trusted root certificates: its top-level files ending .crt .cert .cer .pem .der are read.",
    },
    OptionSpec {
        name: "CertificateReservedNodeCommonName",
        flag: "certificate-reserved-node-common-name",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Text,
        default: "",
        help: "Common name other nodes' certificates must carry (a wildcard such as *.esdb.example.org allowed); empty: this node's own certificate's CN. Reloadable.",
    },
    OptionSpec {
        name: "NodeConnectionResetIntervalMs",
        flag: "node-connection-reset-interval-ms",
        aliases: &[],
        group: "Certificates",
        kind: Kind::Int,
        default: "600000",
        help: "Node-to-node TLS connections are re-established after this long, so reloaded certificates reach the whole cluster within it.",
    },
    OptionSpec {
        name: "DisableAdminUi",
        flag: "disable-admin-ui",
        aliases: &[],
        group: "Interface",
        kind: Kind::Bool,
        default: "false",
        help: "Do not serve the Admin UI (/web/…, and / redirecting to it): those URLs answer 404.",
    },
    OptionSpec {
        name: "EnableUnixSocket",
        flag: "enable-unix-socket",
        aliases: &[],
        group: "Interface",
        kind: Kind::Bool,
        default: "false",
        help: "Listen on a unix domain socket in the database directory (for redaction).",
    },
    OptionSpec {
        name: "GossipOnSingleNode",
        flag: "gossip-on-single-node",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Bool,
        default: "true",
        help: "Answer /gossip on a single node.",
    },
    OptionSpec {
        name: "ClusterSize",
        flag: "cluster-size",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "1",
        help: "Nodes in the cluster (at least 1); a write needs a quorum of ClusterSize/2+1 of them.",
    },
    OptionSpec {
        name: "NodePriority",
        flag: "node-priority",
        aliases: &[],
        group: "Cluster",
        kind: Kind::SignedInt,
        default: "0",
        help: "Preference for this node in leader elections: the highest priority wins among equally up-to-date nodes (may be negative).",
    },
    OptionSpec {
        name: "GossipSeed",
        flag: "gossip-seed",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Endpoints,
        default: "",
        help: "The other nodes' replication endpoints, as ip:port separated by commas; needed when ClusterSize is above 1.",
    },
    OptionSpec {
        name: "ReplicationIp",
        flag: "replication-ip",
        aliases: &["IntIp"],
        group: "Cluster",
        kind: Kind::Ip,
        default: "127.0.0.1",
        help: "Address this node listens on for replication and gossip from the other nodes.",
    },
    OptionSpec {
        name: "ReplicationPort",
        flag: "replication-port",
        aliases: &["IntTcpPort"],
        group: "Cluster",
        kind: Kind::Int,
        default: "1112",
        help: "Port this node listens on for replication and gossip from the other nodes.",
    },
    OptionSpec {
        name: "ReadOnlyReplica",
        flag: "read-only-replica",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Bool,
        default: "false",
        help: "Follow the cluster without voting in elections or counting towards the quorum (needs ClusterSize above 1).",
    },
    OptionSpec {
        name: "CommitTimeoutMs",
        flag: "commit-timeout-ms",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "2000",
        help: "Milliseconds a write waits for a quorum to acknowledge it before it fails.",
    },
    OptionSpec {
        name: "PrepareTimeoutMs",
        flag: "prepare-timeout-ms",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "2000",
        help: "Milliseconds a write waits to be prepared on a quorum before it fails.",
    },
    OptionSpec {
        name: "GossipIntervalMs",
        flag: "gossip-interval-ms",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "1000",
        help: "Milliseconds between gossip rounds.",
    },
    OptionSpec {
        name: "GossipTimeoutMs",
        flag: "gossip-timeout-ms",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "500",
        help: "Milliseconds before a gossip request to another node is given up.",
    },
    OptionSpec {
        name: "GossipAllowedDifferenceMs",
        flag: "gossip-allowed-difference-ms",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "60000",
        help: "Largest clock difference, in milliseconds, allowed between nodes before gossip from another node is rejected.",
    },
    OptionSpec {
        name: "LeaderElectionTimeoutMs",
        flag: "leader-election-timeout-ms",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "1000",
        help: "Milliseconds an election round waits before starting over (at least 100).",
    },
    OptionSpec {
        name: "ReplicationHeartbeatInterval",
        flag: "replication-heartbeat-interval",
        aliases: &["IntTcpHeartbeatInterval"],
        group: "Cluster",
        kind: Kind::Int,
        default: "700",
        help: "Milliseconds between heartbeats on a quiet replication connection.",
    },
    OptionSpec {
        name: "ReplicationHeartbeatTimeout",
        flag: "replication-heartbeat-timeout",
        aliases: &["IntTcpHeartbeatTimeout"],
        group: "Cluster",
        kind: Kind::Int,
        default: "700",
        help: "Milliseconds without a heartbeat reply before a replication connection is closed.",
    },
    OptionSpec {
        name: "DeadMemberRemovalPeriodSec",
        flag: "dead-member-removal-period-sec",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "1800",
        help: "Seconds a dead member stays in gossip before it is forgotten.",
    },
    OptionSpec {
        name: "UnsafeAllowSurplusNodes",
        flag: "unsafe-allow-surplus-nodes",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Bool,
        default: "false",
        help: "Let nodes beyond ClusterSize join the cluster as clones (unsafe: a clone that is promoted may lose acknowledged writes).",
    },
    OptionSpec {
        name: "MaxTruncation",
        flag: "max-truncation",
        aliases: &[],
        group: "Cluster",
        kind: Kind::SignedInt,
        default: "268435456",
        help: "Most bytes of its log a node may truncate to rejoin the cluster before it refuses to start; -1: no limit.",
    },
    OptionSpec {
        name: "DiscoverViaDns",
        flag: "discover-via-dns",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Bool,
        default: "false",
        help: "Find the other nodes through DNS: ClusterDns names them all (one A or AAAA record each), and is asked again every gossip round as members come and go.",
    },
    OptionSpec {
        name: "ClusterDns",
        flag: "cluster-dns",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Text,
        default: "",
        help: "With DiscoverViaDns: the DNS name whose addresses are the cluster's nodes (in Kubernetes, the headless Service's name).",
    },
    OptionSpec {
        name: "ClusterGossipPort",
        flag: "cluster-gossip-port",
        aliases: &[],
        group: "Cluster",
        kind: Kind::Int,
        default: "0",
        help: "With DiscoverViaDns: the port the other nodes gossip and replicate on (their ReplicationPort); 0: the same as this node's.",
    },
    OptionSpec {
        name: "ReplicationHostAdvertiseAs",
        flag: "replication-host-advertise-as",
        aliases: &["IntIpAdvertiseAs", "IntHostAdvertiseAs"],
        group: "Cluster",
        kind: Kind::Text,
        default: "",
        help: "The address (IP or DNS name, resolved at start) the other nodes reach this node's replication endpoint at, when it listens on 0.0.0.0 or behind a translation.",
    },
    OptionSpec {
        name: "ReplicationTcpPortAdvertiseAs",
        flag: "replication-tcp-port-advertise-as",
        aliases: &["IntTcpPortAdvertiseAs"],
        group: "Cluster",
        kind: Kind::Int,
        default: "0",
        help: "The port the other nodes reach this node's replication endpoint at; 0: ReplicationPort.",
    },
    OptionSpec {
        name: "NodeHostAdvertiseAs",
        flag: "node-host-advertise-as",
        aliases: &["ExtIpAdvertiseAs", "ExtHostAdvertiseAs", "AdvertiseHostToClientAs"],
        group: "Cluster",
        kind: Kind::Text,
        default: "",
        help: "The address (IP or DNS name, resolved at start) gossip gives clients for this node's HTTP endpoint; empty: HttpIp, or the replication address when HttpIp is 0.0.0.0.",
    },
    OptionSpec {
        name: "NodePortAdvertiseAs",
        flag: "node-port-advertise-as",
        aliases: &["ExtHttpPortAdvertiseAs", "AdvertiseHttpPortToClientAs"],
        group: "Cluster",
        kind: Kind::Int,
        default: "0",
        help: "The port gossip gives clients for this node's HTTP endpoint; 0: HttpPort.",
    },
    OptionSpec {
        name: "RunProjections",
        flag: "run-projections",
        aliases: &[],
        group: "Projections",
        kind: Kind::Enum(PROJECTIONS),
        default: "None",
        help: "Which projections run: None (the /projections routes answer 404), System (the system projections) or All.",
    },
    OptionSpec {
        name: "StartStandardProjections",
        flag: "start-standard-projections",
        aliases: &[],
        group: "Projections",
        kind: Kind::Bool,
        default: "false",
        help: "Enable the system projections ($streams, $by_category, …) at start (they are created disabled); needs RunProjections System or All.",
    },
    OptionSpec {
        name: "ProjectionsQueryExpiry",
        flag: "projections-query-expiry",
        aliases: &[],
        group: "Projections",
        kind: Kind::Int,
        default: "5",
        help: "Minutes a transient projection is kept after the last request that read or changed it; then it is deleted.",
    },
];

pub(super) fn spec_by_flag(flag: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|o| o.flag == flag || o.aliases.iter().any(|a| flag_of(a) == flag))
}

pub(super) fn spec_by_name(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS
        .iter()
        .find(|o| o.name.eq_ignore_ascii_case(name) || o.aliases.iter().any(|a| a.eq_ignore_ascii_case(name)))
}

/// The command-line flag (without dashes) of a PascalCase option name: `IntTcpPort` gives
/// `int-tcp-port`. Aliases get their flags this way.
pub fn flag_of(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

pub(super) fn env_of_flag(flag: &str) -> String {
    format!("ANNAL_{}", flag.replace('-', "_").to_ascii_uppercase())
}

/// The environment variable of an option.
pub fn env_var(spec: &OptionSpec) -> String {
    env_of_flag(spec.flag)
}

impl OptionSpec {
    /// The flags of the aliases, without dashes.
    pub fn alias_flags(&self) -> Vec<String> {
        self.aliases.iter().map(|a| flag_of(a)).collect()
    }

    /// The environment variables of the aliases.
    pub fn alias_env_vars(&self) -> Vec<String> {
        self.aliases.iter().map(|a| env_of_flag(&flag_of(a))).collect()
    }

    /// A sentence naming the aliases in their three forms, for `--help` and `/info/options`
    /// (`None` without aliases).
    pub fn alias_note(&self) -> Option<String> {
        if self.aliases.is_empty() {
            return None;
        }
        let forms: Vec<String> = self
            .aliases
            .iter()
            .map(|a| format!("{a} (--{}, {})", flag_of(a), env_of_flag(&flag_of(a))))
            .collect();
        Some(format!("Also accepted as {}.", forms.join(", ")))
    }
}
