//! Two things the build needs to know:
//! - whether the tests run in CI (`CI=true`): a test whose prerequisite (a program, root) may be
//!   missing on a developer's machine is ignored there, with the reason, and runs in CI, where a
//!   missing prerequisite fails it (`cfg(annal_ci)`);
//! - the Admin UI's files (`src/http/ui/`, served at `/web/`): listed into `ui_assets.rs` in
//!   `OUT_DIR`, each embedded with `include_bytes!`, so the binary needs nothing beside it.

// A build script runs before the node exists: it reads and writes the build's own files.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(annal_ci)");
    println!("cargo::rerun-if-env-changed=CI");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        println!("cargo::rustc-cfg=annal_ci");
    }
    ui_assets();
}

/// Writes `ui_assets.rs`: `pub static UI_ASSETS: &[(&str, &[u8])]`, every file under
/// `src/http/ui/` by its path relative to that directory (with `/`), sorted.
fn ui_assets() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/ui");
    println!("cargo::rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    if root.is_dir() {
        walk(&root, &mut files);
    }
    files.sort();
    let mut out = String::from("/// The Admin UI's files: path under `/web/`, contents.\npub static UI_ASSETS: &[(&str, &[u8])] = &[\n");
    for f in &files {
        println!("cargo::rerun-if-changed={}", f.display());
        let rel = f.strip_prefix(&root).unwrap_or(f).to_string_lossy().replace('\\', "/");
        out.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", f.display().to_string()));
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("ui_assets.rs");
    if std::fs::read_to_string(&dest).ok().as_deref() != Some(out.as_str()) {
        std::fs::write(&dest, out).unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}
