//! The command lines of the maintenance tools: `annal backup`, `annal backup verify` and
//! `annal restore`. Parses arguments, builds the real environment, runs the procedure, draws a
//! progress line on stderr and prints the summary on stdout.
//!
//! Exit codes: 0 done, 1 the procedure failed (the message names the file, offset or step),
//! 2 a bad command line (nothing was touched).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::copy::{backup, BackupOptions, Progress};
use super::restore::{restore, RestoreOptions};
use super::scavenge::{HttpScavenge, NoNode, ScavengeControl};
use super::verify::verify;
use super::BackupError;
use crate::dblock::{database_id, DbLock};
use crate::env::Env;
use crate::tools::args::Args;
use crate::tools::client::{Endpoint, HttpsTarget};

const BACKUP_HELP: &str = "\
Usage: annal backup --db PATH --to DIR [--differential] [--index PATH]
                    [--url http(s)://HOST:PORT] [--ca-certificate FILE]
                    [--user NAME] [--password PASSWORD] [--quiet]
       annal backup verify DIR

Copies a node's db/ and index to DIR in the order that keeps a copy of a running node
consistent. A running scavenge is stopped through the node's HTTP API first and resumed
afterwards (the user needs $ops or $admins). When the node does not answer and no process
holds the database's lock, the database is copied as a stopped node's.

  --db PATH         the node's database directory
  --index PATH      the node's index directory (default: PATH/index)
  --to DIR          the backup directory: empty (or missing) for a full backup
  --differential    update the backup of this database already in DIR
  --url URL         the node's HTTP endpoint (default http://127.0.0.1:2113); https:// for a
                    node that serves TLS
  --ca-certificate FILE  with https://: the CA certificate(s) (PEM) the node's certificate
                    chains to, such as ca/ca.crt
  --user, --password  credentials (default admin / changeit; or ANNAL_BACKUP_PASSWORD)
  --quiet           no progress line

`annal backup verify DIR` checks every chunk and index file of a backup, opens it as a
restored node would (without changing it) and prints the last event position and the
number of streams.
";

const RESTORE_HELP: &str = "\
Usage: annal restore --from DIR --db PATH [--index PATH] [--overwrite] [--quiet]

Copies the backup in DIR onto a stopped node's directories and writes truncate.chk from the
backup's chaser.chk; the node truncates its log to that point when it starts. Refuses while
a node runs on PATH.

  --from DIR        the backup directory
  --db PATH         the node's database directory
  --index PATH      the node's index directory (default: PATH/index)
  --overwrite       replace a database already in PATH
  --quiet           no progress line
";

/// Runs a maintenance command when `args` (without the program name) names one; `None` when
/// the arguments are the node's own.
pub fn dispatch(args: &[String]) -> Option<ExitCode> {
    let cmd = args.first()?.as_str();
    let rest = &args[1..];
    let code = match cmd {
        "backup" if rest.first().map(String::as_str) == Some("verify") => {
            run(|env| verify_cmd(env, &rest[1..]))
        }
        "backup" => run(|env| backup_cmd(env, rest)),
        "restore" => run(|env| restore_cmd(env, rest)),
        "redact" => crate::redact::tool::main(rest),
        _ => return None,
    };
    Some(code)
}

/// The outcome of a command: a usage error (exit 2) or a failure (exit 1).
enum Failure {
    Usage(String),
    Failed(BackupError),
}

impl From<crate::dblock::LockError> for Failure {
    fn from(e: crate::dblock::LockError) -> Self {
        Failure::Failed(e.into())
    }
}

impl From<String> for Failure {
    fn from(usage: String) -> Self {
        Failure::Usage(usage)
    }
}

impl From<BackupError> for Failure {
    fn from(e: BackupError) -> Self {
        match e {
            BackupError::Usage(m) => Failure::Usage(m),
            e => Failure::Failed(e),
        }
    }
}

fn run<F, Fut>(f: F) -> ExitCode
where
    F: FnOnce(Env) -> Fut,
    Fut: std::future::Future<Output = Result<(), Failure>>,
{
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("annal: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        match f(crate::env::real::env()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Usage(m)) => {
                eprintln!("annal: {m}");
                ExitCode::from(2)
            }
            Err(Failure::Failed(e)) => {
                eprintln!("\nannal: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

fn parse(args: &[String], valued: &[&str], flags: &[&str]) -> Result<Args, Failure> {
    crate::tools::args::parse(args, valued, flags).map_err(Failure::Usage)
}

/// Draws `done / planned` as a bar on stderr.
struct Bar {
    quiet: bool,
    last_drawn: u64,
}

impl Bar {
    fn draw(&mut self, label: &str, done: u64, planned: u64) {
        if self.quiet || (done.saturating_sub(self.last_drawn) < (8 << 20) && done < planned) {
            return;
        }
        self.last_drawn = done;
        let planned = planned.max(done).max(1);
        let filled = (done * 30 / planned) as usize;
        eprint!(
            "\r[{}{}] {:5.1}% {:>9} / {:<9} {:<28}",
            "#".repeat(filled),
            " ".repeat(30 - filled),
            done as f64 * 100.0 / planned as f64,
            human(done),
            human(planned),
            label.chars().take(28).collect::<String>()
        );
    }
    fn finish(&self) {
        if !self.quiet {
            eprintln!();
        }
    }
}

/// Bytes as B, KiB, MiB or GiB.
pub fn human(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn file_label(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

async fn backup_cmd(env: Env, args: &[String]) -> Result<(), Failure> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{BACKUP_HELP}");
        return Ok(());
    }
    let a = parse(
        args,
        &["--db", "--index", "--to", "--url", "--ca-certificate", "--user", "--password"],
        &["--differential", "--quiet"],
    )?;
    if let Some(p) = a.positional.first() {
        return Err(Failure::Usage(format!("unexpected argument {p} (see --help)")));
    }
    let db = PathBuf::from(a.need("--db")?);
    let opts = BackupOptions {
        source_index: a.get("--index").map(PathBuf::from).unwrap_or_else(|| db.join("index")),
        source_db: db.clone(),
        dest: PathBuf::from(a.need("--to")?),
        differential: a.flag("--differential"),
    };
    let url = Endpoint::parse(a.get("--url").unwrap_or("http://127.0.0.1:2113"))
        .map_err(|e| format!("--url {e}"))?;
    let addr = url.to_string();
    let password = a
        .get("--password")
        .map(str::to_string)
        .or_else(|| std::env::var("ANNAL_BACKUP_PASSWORD").ok())
        .unwrap_or_else(|| "changeit".into());
    let mut client = crate::tools::client::NodeClient::new(env.clone(), &url.host, url.port)
        .with_credentials(a.get("--user").unwrap_or("admin"), &password);
    match (url.https, a.get("--ca-certificate")) {
        (true, Some(ca)) => {
            let target = HttpsTarget::new(&env, Path::new(ca), &url.host).map_err(|e| Failure::Usage(format!("--ca-certificate: {e}")))?;
            client = client.with_tls(target);
        }
        (true, None) => {
            return Err(Failure::Usage(
                "--url https://… needs --ca-certificate FILE: the CA certificate the node's certificate chains to".into(),
            ))
        }
        (false, Some(_)) => {
            return Err(Failure::Usage("--ca-certificate goes with an https:// --url".into()))
        }
        (false, None) => {}
    }
    let http = HttpScavenge::of(client);
    // A node answering: it controls scavenges. None answering: the database's lock proves that
    // no node runs on it (and keeps one from starting until the backup is done).
    let mut offline_lock = None;
    let mut control: Box<dyn ScavengeControl> = if http.reachable().await {
        Box::new(http)
    } else {
        match DbLock::acquire(&env, &db) {
            Ok(lock) => {
                offline_lock = Some(lock);
                Box::new(NoNode)
            }
            Err(crate::dblock::LockError::Held(_)) => {
                return Err(Failure::Failed(BackupError::Scavenge(format!(
                "a node runs on {} but does not answer at {addr}; pass its --url so scavenges can be stopped",
                db.display()
            ))))
            }
            Err(e) => return Err(e.into()),
        }
    };
    if !env.disk.exists(&db.join("writer.chk")) {
        return Err(Failure::Failed(BackupError::NotA {
            path: db.clone(),
            what: "a database directory",
            detail: "it has no writer.chk".into(),
        }));
    }
    let id = database_id(&env, &db)?;
    // The start line; the summary on stdout (or the failure on stderr) is the end line.
    eprintln!(
        "annal backup: {} backup of {} to {} started",
        if opts.differential { "differential" } else { "full" },
        opts.source_db.display(),
        opts.dest.display()
    );
    let mut bar = Bar { quiet: a.flag("--quiet"), last_drawn: 0 };
    let mut label = String::new();
    let summary = backup(&env, &opts, &id, &mut *control, &mut |p| match p {
        Progress::Step(s) => label = s.to_string(),
        Progress::File(f) => label = file_label(f),
        Progress::Bytes { done, planned } => bar.draw(&label, done, planned),
    })
    .await;
    bar.finish();
    drop(offline_lock);
    let s = summary?;
    let secs = s.elapsed.as_secs_f64().max(1e-6);
    println!(
        "{} backup of {} to {} complete",
        if opts.differential { "differential" } else { "full" },
        opts.source_db.display(),
        opts.dest.display()
    );
    println!(
        "  copied {} files, {} in {:.1} s ({:.0} MiB/s); kept {} files; removed {}",
        s.files_copied,
        human(s.bytes_copied),
        secs,
        s.bytes_copied as f64 / (1u64 << 20) as f64 / secs,
        s.files_kept,
        s.files_removed
    );
    println!(
        "  {} chunk files; covers the log up to position {} (chaser.chk; writer.chk {})",
        s.chunks, s.chaser, s.writer
    );
    if s.index_moving {
        println!("  the index kept changing: the backup holds a consistent earlier state of it, which a restored node brings up to date from the log");
    }
    if s.relisted > 0 {
        println!("  the node changed files during the copy: listed again {} times", s.relisted);
    }
    match (&s.scavenge_stopped, &s.scavenge_resumed) {
        (Some(id), Some(Ok(new))) => {
            println!("  scavenge {id} was stopped for the backup and resumed as {new}")
        }
        (Some(id), Some(Err(e))) => {
            println!("  scavenge {id} was stopped for the backup; RESUMING IT FAILED: {e}; start it again with POST /admin/scavenge")
        }
        _ => {}
    }
    Ok(())
}

async fn verify_cmd(env: Env, args: &[String]) -> Result<(), Failure> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{BACKUP_HELP}");
        return Ok(());
    }
    let a = parse(args, &[], &[])?;
    let [dir] = a.positional.as_slice() else {
        return Err(Failure::Usage("usage: annal backup verify DIR".into()));
    };
    let dir = PathBuf::from(dir);
    let e = env.clone();
    let d = dir.clone();
    let r = env.blocking(move || verify(&e, &d)).await?;
    for n in &r.notes {
        println!("note: {n}");
    }
    println!("backup {} verified", dir.display());
    println!(
        "  {} chunk files ({}), {} records checked; {} index tables, {} entries",
        r.chunks,
        human(r.chunk_bytes),
        r.records,
        r.index_tables,
        r.index_entries
    );
    println!("  a restore holds the log up to position {} (chaser.chk; writer.chk {})", r.chaser, r.writer);
    match r.last_event_position {
        Some(p) => println!("  last event position: {p}"),
        None => println!("  last event position: none (no events)"),
    }
    println!("  events: {}, streams: {}", r.events, r.streams);
    Ok(())
}

async fn restore_cmd(env: Env, args: &[String]) -> Result<(), Failure> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{RESTORE_HELP}");
        return Ok(());
    }
    let a = parse(args, &["--from", "--db", "--index"], &["--overwrite", "--quiet"])?;
    if let Some(p) = a.positional.first() {
        return Err(Failure::Usage(format!("unexpected argument {p} (see --help)")));
    }
    let db = PathBuf::from(a.need("--db")?);
    let opts = RestoreOptions {
        from: PathBuf::from(a.need("--from")?),
        index: a.get("--index").map(PathBuf::from).unwrap_or_else(|| db.join("index")),
        db,
        overwrite: a.flag("--overwrite"),
    };
    let quiet = a.flag("--quiet");
    eprintln!("annal restore: restore of {} onto {} started", opts.from.display(), opts.db.display());
    let began = env.clock.monotonic();
    let e = env.clone();
    let o = opts.clone();
    let s = env
        .blocking(move || {
            let mut bar = Bar { quiet, last_drawn: 0 };
            let r = restore(&e, &o, &mut |p, done| bar.draw(&file_label(p), done, 0));
            bar.finish();
            r
        })
        .await?;
    let secs = env.clock.monotonic().saturating_sub(began).as_secs_f64().max(1e-6);
    println!("restored {} onto {}", opts.from.display(), opts.db.display());
    println!(
        "  copied {} files, {} in {:.1} s ({:.0} MiB/s); removed {} files of the earlier database",
        s.files,
        human(s.bytes),
        secs,
        s.bytes as f64 / (1u64 << 20) as f64 / secs,
        s.removed
    );
    println!("  truncate.chk = {}: the node truncates its log to it when it starts", s.truncate_to);
    Ok(())
}
