//! The command-line tools that talk to running nodes over their HTTP API: `annal healthcheck`
//! (a container's liveness probe) and `annal cluster rolling-restart`. [`args`] parses their
//! arguments (and the maintenance tools'), [`client`] is their HTTP client (also `annal
//! backup`'s).
//!
//! Exit codes: 0 done, 1 the procedure failed (the message says which node and why), 2 a bad
//! command line (nothing was asked of any node).

pub mod args;
pub mod client;
pub mod healthcheck;
pub mod rolling;

use std::process::ExitCode;

/// Runs a tool when `args` (without the program name) names one; `None` when the arguments are
/// another command's.
pub fn dispatch(args: &[String]) -> Option<ExitCode> {
    let rest = args.get(1..).unwrap_or_default();
    match args.first()?.as_str() {
        "healthcheck" => Some(run(|env| healthcheck::main(env, rest))),
        "cluster" if rest.first().map(String::as_str) == Some("rolling-restart") => {
            Some(run(|env| rolling::main(env, &rest[1..])))
        }
        "cluster" => {
            say("annal cluster: the command is `annal cluster rolling-restart` (see --help)");
            Some(ExitCode::from(2))
        }
        _ => None,
    }
}

/// How a tool ended.
pub enum Outcome {
    /// Done.
    Done,
    /// A bad command line (exit 2).
    Usage(String),
    /// The procedure failed (exit 1).
    Failed(String),
    /// Help was asked for: printed on stdout (exit 0).
    Help(&'static str),
}

/// Writes a line to standard error, ignoring a failure (a closed pipe must not panic a tool).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn run<F: std::future::Future<Output = Outcome>>(tool: impl FnOnce(crate::env::Env) -> F) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            say(&format!("annal: cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(async move { tool(crate::env::real::env()).await }) {
        Outcome::Done => ExitCode::SUCCESS,
        Outcome::Help(text) => {
            use std::io::Write;
            let _ = write!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Outcome::Usage(m) => {
            say(&format!("annal: {m}"));
            ExitCode::from(2)
        }
        Outcome::Failed(m) => {
            say(&format!("annal: {m}"));
            ExitCode::FAILURE
        }
    }
}
