//! Whether the tests run in CI (`CI=true`): the tests that need root and network namespaces are
//! ignored elsewhere, with the reason, and run in CI, where a missing prerequisite fails them
//! (`cfg(annal_ci)`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(annal_ci)");
    println!("cargo::rerun-if-env-changed=CI");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        println!("cargo::rustc-cfg=annal_ci");
    }
}
