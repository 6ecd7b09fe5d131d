//! The `annal` binary: parses options, builds the real environment and runs one node.
//!
//! Its log goes to standard error. Nothing it writes there or to standard output may stop it:
//! a closed pipe (`annal … 2>&1 | head -3`) loses the lines, never the process.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use annal::config::Config;
use annal::node::Node;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Writes a line to standard error, ignoring a failure (`eprintln!` would panic on a closed pipe).
fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The log's level, changed at runtime through the subscriber's reload handle.
struct LogLevels {
    handle: tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
    current: std::sync::Mutex<&'static str>,
    format: &'static str,
}

impl annal::logs::LogControl for LogLevels {
    fn level(&self) -> &'static str {
        *self.current.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn set_level(&self, level: &'static str) -> Result<(), String> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        self.handle
            .reload(tracing_subscriber::EnvFilter::new(level.to_ascii_lowercase()))
            .map_err(|e| format!("cannot change the log level: {e}"))?;
        *current = level;
        Ok(())
    }
    fn format(&self) -> &'static str {
        self.format
    }
}

/// Starts the log on standard error: text, or JSON lines with `--log-format json`.
fn start_log(config: &Config) -> annal::logs::SharedLogControl {
    use tracing_subscriber::prelude::*;
    let level = annal::logs::level(&config.log_level).unwrap_or("Info");
    let (filter, handle) = tracing_subscriber::reload::Layer::new(tracing_subscriber::EnvFilter::new(
        level.to_ascii_lowercase(),
    ));
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(!config.log_json && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // A line that cannot be written is dropped: reporting that failure on the same closed
        // stderr would panic the task that logged (the signal handler's, for one), and the
        // node would never shut down.
        .log_internal_errors(false);
    let registry = tracing_subscriber::registry().with(filter);
    if config.log_json {
        let node = format!("{}:{}", config.http_ip, config.http_port);
        let format = annal::logs::JsonLines { node, clock: annal::env::real::clock() };
        registry.with(lines.event_format(format)).init();
    } else {
        registry.with(lines).init();
    }
    let format = if config.log_json { "Json" } else { "Text" };
    Arc::new(LogLevels { handle, current: std::sync::Mutex::new(level), format })
}

/// A build with the `sim` feature turns on the bug switches named in `NODE_BUG_SWITCHES`
/// (comma-separated), for every thread: a deliberately broken node, so the real-process fault
/// harness (`annal-netns --bugs`) can show that its checkers catch it. Production builds do not
/// have the feature and ignore the variable.
#[cfg(feature = "sim")]
fn broken_build_switches() -> Result<(), String> {
    let Ok(names) = std::env::var("NODE_BUG_SWITCHES") else { return Ok(()) };
    let bugs = names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(|n| {
            annal::buggify::Bug::parse(n).ok_or_else(|| format!("NODE_BUG_SWITCHES: no bug switch {n:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    annal::buggify::set_process_bugs(&bugs);
    say(format_args!("annal: a deliberately broken build: bug switches {names} are on"));
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("certs") {
        return annal::tls::tool::main(&args[1..]);
    }
    if let Some(code) = annal::backup::cli::dispatch(&args) {
        return code;
    }
    if let Some(code) = annal::tools::dispatch(&args) {
        return code;
    }
    #[cfg(feature = "sim")]
    if let Err(e) = broken_build_switches() {
        say(format_args!("annal: {e}"));
        return ExitCode::from(2);
    }
    let env_vars = annal::env::real::annal_vars();
    let config = match Config::parse(&args, &env_vars, annal::env::real::read_text_file) {
        Ok(c) => c,
        Err(e) => {
            say(format_args!("annal: {e}"));
            return ExitCode::from(2);
        }
    };
    if config.help {
        let _ = write!(std::io::stdout(), "{}", Config::help_text());
        return ExitCode::SUCCESS;
    }
    if config.version {
        let _ = writeln!(std::io::stdout(), "annal {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let log_control = start_log(&config);
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    if config.batch_scheduling {
        if let Err(e) = annal::env::real::batch_scheduling() {
            tracing::warn!(error = %e, "cannot run the node's threads under SCHED_BATCH; they keep the default policy");
        }
    }
    let rt = match annal::env::real::node_runtime(config.worker_threads_for(annal::env::real::cores())) {
        Ok(rt) => rt,
        Err(e) => {
            say(format_args!("annal: cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let env =
            if config.mem_db { annal::env::real::env_with_memory_disk() } else { annal::env::real::env() };
        let opened = {
            let env = env.clone();
            let config = config.clone();
            // Certificate files are on the real disk even when the database is in memory.
            let files: Arc<dyn annal::env::Disk> = Arc::new(annal::env::real::RealDisk);
            env.clone().blocking(move || Node::open_with_files(env, config, files)).await
        };
        let node: Arc<Node> = match opened {
            Ok(n) => n,
            Err(e) => {
                say(format_args!("annal: {e}"));
                return ExitCode::FAILURE;
            }
        };
        let (addr, serve) = match node.bind().await {
            Ok(x) => x,
            Err(e) => {
                say(format_args!("annal: {e}"));
                return ExitCode::FAILURE;
            }
        };
        // Signals are taken before the node says it serves (a SIGTERM right after is a clean
        // shutdown, not the default end of the process).
        let termination = annal::env::real::Termination::listen();
        tracing::info!(%addr, db = %config.db.display(), mem_db = config.mem_db, scheme = node.scheme(), "annal is serving HTTP");
        // A reload reads the options again: the command line and environment are as at start,
        // the YAML file may have changed.
        let (again_args, again_env) = (args.clone(), env_vars.clone());
        node.set_log_control(log_control);
        node.set_config_source(Arc::new(move || {
            Config::parse(&again_args, &again_env, annal::env::real::read_text_file).map_err(|e| e.to_string())
        }));
        match annal::env::real::Hangups::listen() {
            Ok(mut hangups) => {
                let reloads = node.clone();
                tokio::spawn(async move {
                    while hangups.next().await {
                        tracing::info!("reloading the node's configuration since the SIGHUP signal has been received");
                        match reloads.reload_certificates().await {
                            None | Some(Err(_)) => {} // logged by the reload
                            Some(Ok(_)) => tracing::info!("the node's configuration was successfully reloaded"),
                        }
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot listen for SIGHUP; reload with POST /admin/reloadconfig"),
        }
        let signals = node.clone();
        tokio::spawn(async move {
            match termination {
                Ok(t) => t.wait().await,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM and SIGINT; shut down with POST /admin/shutdown");
                    return;
                }
            }
            tracing::info!("termination signal: shutting down");
            signals.shut_down_gracefully().await;
        });
        // However the shutdown goes, the process ends within --shutdown-timeout of its start.
        let bounded = node.clone();
        let limit = config.shutdown_timeout;
        tokio::spawn(async move {
            let mut asked = bounded.stop_began();
            let _ = asked.wait_for(|s| *s).await;
            bounded.env().rt.sleep(limit).await;
            say(format_args!("annal: the shutdown did not finish within {limit:?} (--shutdown-timeout); exiting"));
            std::process::exit(1);
        });
        match serve.await {
            Ok(()) => {
                tracing::info!("shut down cleanly");
                ExitCode::SUCCESS
            }
            Err(e) => {
                say(format_args!("annal: shutdown failed: {e}"));
                ExitCode::FAILURE
            }
        }
    })
}
