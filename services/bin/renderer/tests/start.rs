#[path = "../../start_test.rs"]
mod start_test;

/// Settings are checked once a browser is found (the test command installs one).
#[test]
fn bad_settings_stop_it_with_the_variable_named() {
    if trawl_renderer::find_chromium(None).is_none() {
        eprintln!("skipped: no Chromium found (scripts/chromium.sh installs one)");
        return;
    }
    start_test::bad_settings_stop_it_with_the_variable_named(
        env!("CARGO_BIN_EXE_trawl-renderer"),
        "renderer",
    );
}

/// Without a browser it does not start (it would mark itself live and take no page).
#[test]
fn no_browser_no_renderer() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trawl-renderer"))
        .env("TRAWL_CHROMIUM", "/nonexistent/chromium")
        .env("TRAWL_NATS_URL", "nats://127.0.0.1:1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no Chromium found") && err.contains("TRAWL_CHROMIUM"),
        "{err}"
    );
}
