//! An independent, published EventStoreDB v5 HTTP client drives the node: `geteventstore-promise`
//! (npm) runs `tests/clients/geteventstore.js` against a live node (streams and persistent
//! subscriptions). Under `CI=true` a missing `node` or package fails the test; elsewhere it is
//! skipped with a notice. Install it with
//! `npm install --prefix target/clients --no-audit --no-fund geteventstore-promise@4.0.1`
//! (or point `ANNAL_JS_CLIENTS` at a directory holding its `node_modules`).

#[path = "http_support/mod.rs"]
mod support;

use std::path::PathBuf;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geteventstore_promise_drives_the_node() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let clients = std::env::var_os("ANNAL_JS_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/clients"));
    let modules = clients.join("node_modules");
    let node_ok = tokio::process::Command::new("node")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if !node_ok || !modules.join("geteventstore-promise").is_dir() {
        let why = format!(
            "needs `node` and geteventstore-promise in {} (npm install --prefix target/clients --no-audit --no-fund geteventstore-promise@4.0.1)",
            modules.display()
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        println!("SKIPPED geteventstore_promise_drives_the_node: {why}");
        return;
    }
    let s = support::start().await;
    let out = tokio::process::Command::new("node")
        .arg(root.join("tests/clients/geteventstore.js"))
        .arg(s.addr.ip().to_string())
        .arg(s.addr.port().to_string())
        .env("NODE_PATH", &modules)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("OK"), "client failed:\n{stdout}\n{stderr}");
}
