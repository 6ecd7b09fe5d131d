//! An independent, published EventStoreDB v5 HTTP client drives the node: `geteventstore-promise`
//! (npm) runs `tests/clients/geteventstore.js` against a live node (streams and persistent
//! subscriptions) and `tests/clients/geteventstore-projections.js` against one running
//! projections (`RunProjections All`: create and update, state and result with and without a
//! partition, info, configuration, reset, stop and start, remove). The tests run in CI
//! (`CI=true` when they are built), where a missing `node` or package fails them; elsewhere they
//! are ignored with the reason (`cargo test -- --ignored` runs them). Install it with
//! `npm install --prefix target/clients --no-audit --no-fund geteventstore-promise@4.0.1`
//! (or point `JS_CLIENTS_DIR` at a directory holding its `node_modules`; not an `ANNAL_` name,
//! which nodes started by other tests would take for one of their options).

#[path = "http_support/mod.rs"]
mod support;

use std::path::PathBuf;

use annal::config::RunProjections;

/// Where the client package lives; a test that needs it fails when `node` or the package is
/// missing (the tests that call this are ignored outside CI, see the crate doc).
async fn client_modules() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let clients =
        std::env::var_os("JS_CLIENTS_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target/clients"));
    let modules = clients.join("node_modules");
    let node_ok = tokio::process::Command::new("node")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    assert!(
        node_ok && modules.join("geteventstore-promise").is_dir(),
        "needs `node` and geteventstore-promise in {} (npm install --prefix target/clients --no-audit --no-fund geteventstore-promise@4.0.1)",
        modules.display()
    );
    modules
}

/// Runs `tests/clients/{script}` against `s`; it must print `OK` and succeed.
async fn run_script(s: &support::Server, modules: &PathBuf, script: &str) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = tokio::process::Command::new("node")
        .arg(root.join("tests/clients").join(script))
        .arg(s.addr.ip().to_string())
        .arg(s.addr.port().to_string())
        .env("NODE_PATH", modules)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("OK"), "{script} failed:\n{stdout}\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(annal_ci),
    ignore = "needs `node` and the npm package geteventstore-promise (.ci/run installs them; CI=true runs this)"
)]
async fn geteventstore_promise_drives_the_node() {
    let modules = client_modules().await;
    let s = support::start().await;
    run_script(&s, &modules, "geteventstore.js").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(annal_ci),
    ignore = "needs `node` and the npm package geteventstore-promise (.ci/run installs them; CI=true runs this)"
)]
async fn geteventstore_promise_drives_projections() {
    let modules = client_modules().await;
    let s = support::start_with(|c| c.run_projections = RunProjections::All).await;
    run_script(&s, &modules, "geteventstore-projections.js").await;
}
