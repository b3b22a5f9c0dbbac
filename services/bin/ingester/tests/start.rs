#[path = "../../start_test.rs"]
mod start_test;

#[test]
fn bad_settings_stop_it_with_the_variable_named() {
    start_test::bad_settings_stop_it_with_the_variable_named(
        env!("CARGO_BIN_EXE_trawl-ingester"),
        "ingester",
    );
}
