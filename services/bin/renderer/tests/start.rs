#[path = "../../start_test.rs"]
mod start_test;

/// Settings are read before the browser is looked for: no Chromium is needed.
#[test]
fn bad_settings_stop_it_with_the_variable_named() {
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

/// A browser named only in the settings file (`process.chromium` in TRAWL_CONFIG) is
/// enough: the service gets past its check to the connection (it once looked at
/// TRAWL_CHROMIUM alone, and refused to start).
#[test]
fn a_browser_named_in_the_settings_file_is_enough() {
    let Some(chromium) = trawl_renderer::find_chromium(None) else {
        eprintln!("skipped: no Chromium found (scripts/chromium.sh installs one)");
        return;
    };
    let config =
        std::env::temp_dir().join(format!("trawl-renderer-start-{}.json", std::process::id()));
    // A path's Debug form is a JSON string for the paths a browser is installed at.
    std::fs::write(
        &config,
        format!("{{\"process\": {{\"chromium\": {chromium:?}}}}}"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trawl-renderer"))
        .env("TRAWL_CONFIG", &config)
        .env_remove("TRAWL_CHROMIUM")
        .env_remove("CHROME")
        // Not found on PATH either: only the file names it.
        .env("PATH", "")
        .env("TRAWL_NATS_URL", "nats://127.0.0.1:1")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&config);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!err.contains("no Chromium found"), "{err}");
    assert!(err.contains("NATS at"), "{err}");
}
