//! Determinism lint: every `tokio::select!` in node code must be `biased;`, because an unbiased
//! select picks its branch with a random number the simulator does not control, and then a seed no
//! longer replays. The check reads the sources under `src/` (the test's own, legitimate file
//! access: it inspects the repository, not the node's data).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `select!` invocations in `text` whose first token is not `biased;`, as 1-based line numbers.
fn unbiased(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("select!") {
        let line = text[..i].matches('\n').count() + 1;
        let start = text[..i].rfind('\n').map_or(0, |n| n + 1);
        let prefix = text[start..i].trim_start();
        if prefix.starts_with("//") || prefix.starts_with("//!") {
            continue;
        }
        let rest = text[i + "select!".len()..].trim_start();
        let Some(body) = rest.strip_prefix(['{', '(']) else { continue };
        if !body.trim_start().starts_with("biased;") {
            out.push(line);
        }
    }
    out
}

#[test]
fn every_select_in_src_is_biased() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    assert!(files.len() > 10, "found the sources");
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        seen += text.matches("select!").count();
        for line in unbiased(&text) {
            bad.push(format!("{}:{line}", f.display()));
        }
    }
    assert!(seen > 0, "the node has select! invocations to check");
    assert!(bad.is_empty(), "tokio::select! without `biased;` (nondeterministic under simulation): {bad:?}");
}

#[test]
fn the_lint_tells_biased_from_unbiased() {
    assert!(unbiased("tokio::select! {\n biased;\n _ = a => {}\n}").is_empty());
    assert_eq!(unbiased("x\ntokio::select! {\n _ = a => {}\n}"), vec![2]);
    assert!(unbiased("// tokio::select! { _ = a => {} }").is_empty());
}
