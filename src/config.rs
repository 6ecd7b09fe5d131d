//! Server options: one table ([`OPTIONS`]) drives the command line, the YAML file, the `ANNAL_`
//! environment variables, `--help` and `GET /info/options`.
//!
//! Precedence, lowest first: built-in default, YAML file (`--config`), environment, command line.
//! Every option has a YAML key (PascalCase, as in the spec), a flag (`--kebab-case`) and an
//! environment variable (`ANNAL_` + SCREAMING_SNAKE_CASE). Unknown or malformed options are errors.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

/// The value type of an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true`/`false`; a bare flag means true.
    Bool,
    /// A non-negative integer.
    Int,
    /// Free text or a path.
    Text,
    /// An IP address.
    Ip,
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
/// Default chunk size with `--mem-db`.
pub const MEM_DB_CHUNK_SIZE: u64 = 16 * 1024 * 1024;

/// Every option the node understands.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "Help",
        flag: "help",
        group: "Application",
        kind: Kind::Bool,
        default: "false",
        help: "Show this help and exit.",
    },
    OptionSpec {
        name: "Version",
        flag: "version",
        group: "Application",
        kind: Kind::Bool,
        default: "false",
        help: "Show the version and exit.",
    },
    OptionSpec {
        name: "Config",
        flag: "config",
        group: "Application",
        kind: Kind::Text,
        default: "",
        help: "YAML file with options (keys as in this table).",
    },
    OptionSpec {
        name: "LogLevel",
        flag: "log-level",
        group: "Application",
        kind: Kind::Enum(&["Error", "Warn", "Info", "Debug", "Trace"]),
        default: "Info",
        help: "Lowest level of log messages written to stderr.",
    },
    OptionSpec {
        name: "Db",
        flag: "db",
        group: "Database",
        kind: Kind::Text,
        default: "./data",
        help: "Directory of the transaction log (chunk files and checkpoints).",
    },
    OptionSpec {
        name: "Index",
        flag: "index",
        group: "Database",
        kind: Kind::Text,
        default: "",
        help: "Directory of the index (default: <db>/index).",
    },
    OptionSpec {
        name: "MemDb",
        flag: "mem-db",
        group: "Database",
        kind: Kind::Bool,
        default: "false",
        help: "Keep the database in memory only (lost on exit); chunks default to 16 MiB then.",
    },
    OptionSpec {
        name: "ChunkSize",
        flag: "chunk-size",
        group: "Database",
        kind: Kind::Int,
        default: "268435456",
        help: "Data bytes per chunk file (fixed when the database is created).",
    },
    OptionSpec {
        name: "MaxEventSize",
        flag: "max-event-size",
        group: "Database",
        kind: Kind::Int,
        default: "16777216",
        help: "Largest event (data plus metadata) accepted, in bytes.",
    },
    OptionSpec {
        name: "MaxAppendSize",
        flag: "max-append-size",
        group: "Database",
        kind: Kind::Int,
        default: "33554432",
        help: "Largest HTTP append request body accepted, in bytes.",
    },
    OptionSpec {
        name: "MemTableSize",
        flag: "mem-table-size",
        group: "Database",
        kind: Kind::Int,
        default: "1000000",
        help: "Index entries held in memory before they are written to an index table.",
    },
    OptionSpec {
        name: "WorkerThreads",
        flag: "worker-threads",
        group: "Application",
        kind: Kind::Int,
        default: "0",
        help: "Threads serving HTTP; 0: one less than the cores (at least 1), so group commits and reads on their own threads keep a core.",
    },
    OptionSpec {
        name: "MaxIndexTables",
        flag: "max-index-tables",
        group: "Database",
        kind: Kind::Int,
        default: "4",
        help: "Index tables allowed before they are merged in the background.",
    },
    OptionSpec {
        name: "StreamExistenceFilterSize",
        flag: "stream-existence-filter-size",
        group: "Database",
        kind: Kind::Int,
        default: "16777216",
        help: "Size in bytes of the stream existence bloom filter.",
    },
    OptionSpec {
        name: "StreamInfoCacheCapacity",
        flag: "stream-info-cache-capacity",
        group: "Database",
        kind: Kind::Int,
        default: "100000",
        help: "Streams whose state is kept in memory.",
    },
    OptionSpec {
        name: "DisableScavengeMerging",
        flag: "disable-scavenge-merging",
        group: "Database",
        kind: Kind::Bool,
        default: "false",
        help: "Do not merge small scavenged chunks.",
    },
    OptionSpec {
        name: "ScavengeHistoryMaxAge",
        flag: "scavenge-history-max-age",
        group: "Database",
        kind: Kind::Int,
        default: "30",
        help: "Days to keep scavenge history streams.",
    },
    OptionSpec {
        name: "AlwaysKeepScavenged",
        flag: "always-keep-scavenged",
        group: "Database",
        kind: Kind::Bool,
        default: "false",
        help: "Deprecated: always keep the newer chunk of a scavenge.",
    },
    OptionSpec {
        name: "ScavengeBackendPageSize",
        flag: "scavenge-backend-page-size",
        group: "Database",
        kind: Kind::Int,
        default: "16",
        help: "Page size of the scavenge database, in KiB.",
    },
    OptionSpec {
        name: "ScavengeBackendCacheSize",
        flag: "scavenge-backend-cache-size",
        group: "Database",
        kind: Kind::Int,
        default: "67108864",
        help: "Cache of the scavenge database, in bytes.",
    },
    OptionSpec {
        name: "ScavengeHashUsersCacheCapacity",
        flag: "scavenge-hash-users-cache-capacity",
        group: "Database",
        kind: Kind::Int,
        default: "100000",
        help: "Stream hashes remembered for collision checks during scavenge accumulation.",
    },
    OptionSpec {
        name: "HttpIp",
        flag: "http-ip",
        group: "Interface",
        kind: Kind::Ip,
        default: "127.0.0.1",
        help: "Address the HTTP API listens on.",
    },
    OptionSpec {
        name: "HttpPort",
        flag: "http-port",
        group: "Interface",
        kind: Kind::Int,
        default: "2113",
        help: "Port of the HTTP API (0 picks a free port).",
    },
    OptionSpec {
        name: "Insecure",
        flag: "insecure",
        group: "Interface",
        kind: Kind::Bool,
        default: "false",
        help: "Allow plain HTTP on a non-loopback address.",
    },
    OptionSpec {
        name: "EnableUnixSocket",
        flag: "enable-unix-socket",
        group: "Interface",
        kind: Kind::Bool,
        default: "false",
        help: "Listen on a unix domain socket in the database directory (for redaction).",
    },
    OptionSpec {
        name: "GossipOnSingleNode",
        flag: "gossip-on-single-node",
        group: "Cluster",
        kind: Kind::Bool,
        default: "true",
        help: "Answer /gossip on a single node.",
    },
    OptionSpec {
        name: "CertificateReservedNodeCommonName",
        flag: "certificate-reserved-node-common-name",
        group: "Certificate",
        kind: Kind::Text,
        default: "",
        help: "Common name reserved for cluster nodes (honoured on configuration reload).",
    },
    OptionSpec {
        name: "RunProjections",
        flag: "run-projections",
        group: "Projections",
        kind: Kind::Enum(PROJECTIONS),
        default: "None",
        help: "Which projections run: None, System or All.",
    },
];

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
    /// `--enable-unix-socket`.
    pub enable_unix_socket: bool,
    /// `--run-projections`.
    pub run_projections: RunProjections,
    /// `--log-level`.
    pub log_level: String,
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
}

fn spec_by_flag(flag: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|o| o.flag == flag)
}

fn spec_by_name(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|o| o.name.eq_ignore_ascii_case(name))
}

/// The environment variable of an option.
pub fn env_var(spec: &OptionSpec) -> String {
    format!("ANNAL_{}", spec.flag.replace('-', "_").to_ascii_uppercase())
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
            for (k, v) in map {
                let key = k.as_str().ok_or_else(|| ConfigError::File {
                    path: path.clone(),
                    reason: "keys must be strings".into(),
                })?;
                let spec =
                    spec_by_name(key).ok_or_else(|| ConfigError::Unknown(format!("{key} (in {path})")))?;
                let text = match v {
                    serde_yaml::Value::String(s) => s,
                    serde_yaml::Value::Bool(b) => b.to_string(),
                    serde_yaml::Value::Number(n) => n.to_string(),
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
        for (k, v) in env {
            if let Some(rest) = k.strip_prefix("ANNAL_") {
                let flag = rest.to_ascii_lowercase().replace('_', "-");
                let spec = spec_by_flag(&flag).ok_or_else(|| ConfigError::Unknown(k.clone()))?;
                values.insert(spec.name, (check(spec, v)?, Source::Environment));
            }
        }
        for (spec, v) in cli {
            values.insert(spec.name, (v, Source::CommandLine));
        }
        Config::from_values(values)
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
        if !http_ip.is_loopback() && !insecure {
            return Err(ConfigError::Conflict(format!(
                "refusing to serve plain HTTP on {http_ip}, which is not a loopback address: TLS is not configured; pass --insecure to allow it"
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
        Ok(Config {
            db,
            index,
            mem_db: flag("MemDb"),
            chunk_size,
            max_event_bytes,
            max_append_bytes: int("MaxAppendSize").max(1) as usize,
            memtable_max: int("MemTableSize").max(1) as usize,
            max_index_tables: int("MaxIndexTables").max(1) as usize,
            worker_threads: int("WorkerThreads").min(1024) as usize,
            existence_filter_bytes: int("StreamExistenceFilterSize").max(8),
            stream_cache_capacity: int("StreamInfoCacheCapacity").max(1) as usize,
            http_ip,
            http_port,
            insecure,
            enable_unix_socket: flag("EnableUnixSocket"),
            run_projections,
            log_level: get("LogLevel"),
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
            "annal: an event stream database speaking the EventStoreDB v5 HTTP dialect\n\nUsage: annal [OPTIONS]\n\n\
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
                Kind::Int => " <N>".into(),
                Kind::Ip => " <IP>".into(),
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
}
