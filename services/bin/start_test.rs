//! The test every service binary has: it refuses settings it cannot run with before it
//! connects to anything, naming the variable. (Running the binaries over the backends is
//! `tests/cluster_services.rs`, which needs them built: these tests are why
//! `cargo test --workspace` builds them.)

use std::process::Command;

pub fn bad_settings_stop_it_with_the_variable_named(binary: &str, stage: &str) {
    for (var, value, named) in [
        ("TRAWL_CONCURRENCY", "0", "concurrency"),
        ("TRAWL_ACK_WAIT_S", "soon", "TRAWL_ACK_WAIT_S"),
    ] {
        let out = Command::new(binary)
            .env(var, value)
            // Nothing listens there: reaching the connection step would be another error.
            .env("TRAWL_NATS_URL", "nats://127.0.0.1:1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{var}={value} was accepted");
        assert!(err.contains(stage) && err.contains(named), "{err}");
        assert!(
            !err.contains("NATS at"),
            "{var}={value} reached the connection: {err}"
        );
    }
}
