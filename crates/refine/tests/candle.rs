//! The candle backend on SmolLM2-135M-Instruct (GGUF, Q4_1, Llama architecture, ChatML):
//! generation stops, the KV cache is reset between pages, and whatever comes out goes
//! through the executor. A 135M model writes no useful programs; the mechanics are tested.
//! `scripts/fetch-smollm2.sh` (run by the test command) fetches the file.

use std::path::PathBuf;

use trawl_refine::backend::candle::Candle;
use trawl_refine::backend::{Backend, BackendError, Request, Sampling};
use trawl_refine::lines::number_lines;
use trawl_refine::program::{Finish, Mode, execute};

fn gguf() -> Option<PathBuf> {
    let p = std::env::var("TRAWL_TEST_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            let cache = std::env::var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|_| {
                    PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache")
                });
            cache.join("trawl/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var("TRAWL_REQUIRE_MODEL").is_err(),
        "{} is missing (scripts/fetch-smollm2.sh fetches it)",
        p.display()
    );
    eprintln!(
        "skipped: {} is missing (scripts/fetch-smollm2.sh fetches it)",
        p.display()
    );
    None
}

const SYSTEM: &str = "You clean web pages. Answer with <keep>, then <extract>, then rm lines for boilerplate, then <keep> again.";

fn page(words: &[&str]) -> String {
    let lines: Vec<String> = words.iter().map(|s| s.to_string()).collect();
    number_lines(&lines)
}

#[test]
fn smollm2_generates_stops_and_resets_between_pages() {
    let Some(path) = gguf() else { return };
    let m = Candle::load(&path).expect("load the GGUF");
    assert!(m.name().starts_with("candle:SmolLM2"));
    assert!(
        !m.stop_tokens().is_empty(),
        "stop tokens come from the tokenizer"
    );
    let a = page(&[
        "Home | About | Contact",
        "Rust 1.90 released",
        "The release adds new lints.",
        "Copyright 2026",
    ]);
    let b = page(&[
        "Login",
        "How to bake bread",
        "Mix flour and water, then wait.",
    ]);
    let req = |p: &str, max: usize| Request {
        system: SYSTEM.into(),
        page: p.into(),
        seed: 7,
        max_new_tokens: max,
        sampling: Sampling::Greedy,
    };
    let first = m.generate(&req(&a, 48)).expect("generate");
    assert!(first.prompt_tokens > 20);
    assert!(first.completion_tokens >= 1 && first.completion_tokens <= 48);
    assert_eq!(
        first.generation.finish == Finish::Length,
        first.completion_tokens == 48
    );
    // Another page between two runs of the same one: with the cache reset and greedy
    // decoding, the same page gives the same tokens.
    let other = m.generate(&req(&b, 48)).expect("generate");
    let again = m.generate(&req(&a, 48)).expect("generate");
    assert_eq!(first.generation, again.generation);
    assert_ne!(first.generation.text, "", "some text came out");
    let _ = other;
    // A tiny budget always ends at the limit.
    let cut = m.generate(&req(&a, 3)).expect("generate");
    assert!(cut.completion_tokens <= 3);
    // Sampling with a fixed seed repeats; the executor takes whatever came out.
    let s = |seed| Request {
        sampling: Sampling::Temperature(1.0),
        seed,
        ..req(&a, 32)
    };
    assert_eq!(
        m.generate(&s(11)).expect("gen").generation,
        m.generate(&s(11)).expect("gen").generation
    );
    let lines: Vec<String> = [
        "Home | About | Contact",
        "Rust 1.90 released",
        "The release adds new lints.",
        "Copyright 2026",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for g in [&first.generation, &cut.generation] {
        let o = execute(&lines, g, Mode::Trawl);
        assert!(o.text.is_some() || o.error.is_some(), "{o:?}");
    }
    // A page past the context is refused before any generation.
    let long = "word ".repeat(m.context() + 10);
    assert!(matches!(
        m.generate(&req(&long, 16)),
        Err(BackendError::TooLong { .. })
    ));
}
