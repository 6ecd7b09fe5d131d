//! Tells the tests whether they run in CI (`CI=true`): a test whose prerequisite (a program,
//! root) may be missing on a developer's machine is ignored there, with the reason, and runs in
//! CI, where a missing prerequisite fails it (`cfg(annal_ci)`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(annal_ci)");
    println!("cargo::rerun-if-env-changed=CI");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        println!("cargo::rustc-cfg=annal_ci");
    }
}
