//! The executor: ReScraper's self-test page in both readings, the fallbacks, and programs
//! made at random (the executor must never panic, never invent text, and agree with the
//! Python reader wherever trawl does not deviate on purpose).

use trawl_refine::program::{
    Decision, Finish, Generation, Mode, Op, ProgramError, Warning, execute, parse_op,
};

fn page() -> Vec<String> {
    [
        "Home Login Register",
        "Best Widgets 2011",
        "The widget is fast [Share on Twitter] and red.",
        "It costs 5 dollars.",
        "Follow us",
        "Copyright 2011 Widgets Inc",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

const DRIP: &str =
    "Best Widgets 2011\nThe widget is fast [Share on Twitter] and red.\nIt costs 5 dollars.";

fn run(text: &str, mode: Mode) -> trawl_refine::Outcome {
    execute(
        &page(),
        &Generation {
            text: text.into(),
            finish: Finish::Stop,
        },
        mode,
    )
}

fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `lib/rescraper_ops.py`'s self-test: the staged rows its `to_staged_row` builds for the
/// six teacher outputs, each read back into (tag, text); here in the staged form and in the
/// decision-first form the released model writes.
#[test]
fn rescraper_selftest_in_parity_mode() {
    let head = "<extract>\nrm 1\nrm 5-6";
    let cases: Vec<(String, &str, String)> = vec![
        (format!("{head}\n<keep>"), "extract", DRIP.to_string()),
        (
            format!("{head}\n<edit>\nsub 3: \"[Share on Twitter] \""),
            "refine",
            "Best Widgets 2011\nThe widget is fast and red.\nIt costs 5 dollars.".into(),
        ),
        (
            format!("{head}\n<edit>\nrm 3"),
            "refine",
            "Best Widgets 2011\nIt costs 5 dollars.".into(),
        ),
        (
            format!("{head}\n<edit>\nBest Widgets 2011\nThe widget is fast and red."),
            "refine",
            "Best Widgets 2011\nThe widget is fast and red.".into(),
        ),
        (format!("{head}\n<delete>"), "delete", String::new()),
        (
            format!("{head}\n<rewrite>\nWidgets are fast and red and cost five dollars."),
            "rewrite",
            "Widgets are fast and red and cost five dollars.".into(),
        ),
    ];
    for (staged, prov, want) in &cases {
        let dec = match *prov {
            "extract" => "<keep>".to_string(),
            "refine" => "<edit>".to_string(),
            other => format!("<{other}>"),
        };
        let dfirst = staged.replacen("<extract>", &format!("{dec}\n<extract>"), 1);
        for program in [staged.clone(), dfirst] {
            let o = run(&program, Mode::Python);
            assert_eq!(o.provenance.as_deref(), Some(*prov), "{program}");
            assert_eq!(
                words(o.text.as_deref().unwrap_or("")),
                words(want),
                "{program}"
            );
        }
    }
}

#[test]
fn selftest_in_trawl_mode_copies_instead_of_taking_payload_text() {
    let program =
        "<edit>\n<extract>\nrm 1\nrm 5-6\n<edit>\nBest Widgets 2011\nThe widget is fast and red.";
    let python = run(program, Mode::Python);
    assert_eq!(
        python.text.as_deref(),
        Some("Best Widgets 2011\nThe widget is fast and red.")
    );
    let trawl = run(program, Mode::Trawl);
    assert_eq!(
        trawl.text.as_deref(),
        Some(DRIP),
        "falls back to the extract-only text"
    );
    assert!(trawl.fell_back);
    assert!(matches!(
        trawl.error,
        Some(ProgramError::EditUnparsed {
            parsed: 0,
            lines: 2
        })
    ));
    assert_eq!(trawl.provenance.as_deref(), Some("extract"));
    let ok = run(
        "<edit>\n<extract>\nrm 1\nrm 5-6\n<edit>\nrm 3\nsub 4: \"5 \"",
        Mode::Trawl,
    );
    assert_eq!(
        ok.text.as_deref(),
        Some("Best Widgets 2011\nIt costs dollars.")
    );
    assert_eq!(ok.provenance.as_deref(), Some("refine"));
    assert_eq!(ok.removed, 4);
}

#[test]
fn truncation_drops_the_cut_line_and_rejects_a_cut_rewrite() {
    let g = |t: &str| Generation {
        text: t.into(),
        finish: Finish::Length,
    };
    // "rm 5" may be the start of "rm 5-6": never read.
    let o = execute(&page(), &g("<keep>\n<extract>\nrm 1\nrm 5"), Mode::Trawl);
    assert_eq!(o.decision, Some(Decision::Keep));
    assert!(o.warnings.contains(&Warning::Truncated));
    assert_eq!(o.text.as_deref().map(|t| t.lines().count()), Some(5));
    let o = execute(
        &page(),
        &g("<rewrite>\n<extract>\nrm 1\n<rewrite>\nWidgets are fast and"),
        Mode::Trawl,
    );
    assert_eq!(o.text, None);
    assert_eq!(o.error, Some(ProgramError::RewriteTruncated));
    let python = execute(
        &page(),
        &g("<rewrite>\n<extract>\nrm 1\n<rewrite>\nWidgets are fast and"),
        Mode::Python,
    );
    assert_eq!(
        python.text.as_deref(),
        Some("Widgets are fast and"),
        "Python accepts it"
    );
    // A cut edit payload with most ops parsed applies those.
    let o = execute(
        &page(),
        &g("<edit>\n<extract>\nrm 1\n<edit>\nrm 5\nrm 6\nrm 2\nrm 4\nsub 3: \"[Share on Tw"),
        Mode::Trawl,
    );
    assert_eq!(
        o.text.as_deref(),
        Some("The widget is fast [Share on Twitter] and red.")
    );
}

#[test]
fn odd_programs_are_read_with_warnings() {
    let o = run(
        "<think>\nthe page is a shop\n</think>\n<keep>\n<extract>\nrm 6-1\nrm 0\nrm 99\nrm 2-4\n<keep>",
        Mode::Trawl,
    );
    assert!(o.warnings.contains(&Warning::Think));
    assert!(
        o.warnings
            .iter()
            .any(|w| matches!(w, Warning::ReversedRange { .. }))
    );
    assert!(o.warnings.contains(&Warning::OutOfRange { count: 2 }));
    assert_eq!(
        o.text.as_deref(),
        Some("Home Login Register\nFollow us\nCopyright 2011 Widgets Inc")
    );
    let o = run("<think>\nnever closed", Mode::Trawl);
    assert_eq!(o.error, Some(ProgramError::ThinkUnclosed));
    let o = run("Sure! Here is the program:\nrm 1", Mode::Trawl);
    assert_eq!(o.error, Some(ProgramError::NoDecision));
    assert_eq!(o.text, None);
    let o = run("<keep>\n<extract>\nrm 1\n<edit>", Mode::Trawl);
    assert!(
        o.warnings
            .iter()
            .any(|w| matches!(w, Warning::TagMismatch { .. }))
    );
    assert_eq!(o.decision, Some(Decision::Keep));
    let o = run(
        "<edit>\n<extract>\n<edit>\nsub 2: \"Gadgets\"\nsub 3: fast",
        Mode::Trawl,
    );
    assert!(o.warnings.contains(&Warning::SubNotFound { line: 2 }));
    assert!(o.warnings.contains(&Warning::SubNotJson { line: 3 }));
    assert!(
        o.text
            .as_deref()
            .is_some_and(|t| t.contains("The widget is [Share"))
    );
    let o = run("<edit>\n<extract>\nrm 1-6\n<edit>", Mode::Trawl);
    assert_eq!(o.error, Some(ProgramError::EmptyAfterExtract));
    assert!(o.warnings.contains(&Warning::EmptyEdit));
    // A rewrite that is a program in disguise fails the post-filter.
    let o = run(
        "<rewrite>\n<extract>\n<rewrite>\nrm 1\nrm 2\nsome text",
        Mode::Trawl,
    );
    assert!(matches!(o.error, Some(ProgramError::PostFilter { .. })));
    assert_eq!(
        parse_op("rm 99999999999999999999999"),
        Some(Op::Rm(u64::MAX, u64::MAX))
    );
    assert_eq!(parse_op("rm 3 - 4"), None);
}

#[test]
fn megabytes_of_noise_are_read_without_harm() {
    let mut noise = String::new();
    let mut x = 0x9e3779b97f4a7c15u64;
    while noise.len() < 3 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.push(char::from_u32((x % 0x2fff) as u32).unwrap_or('?'));
        if x.is_multiple_of(11) {
            noise.push('\n');
        }
    }
    for text in [
        noise.clone(),
        format!("<keep>\n<extract>\n{noise}"),
        format!("<edit>\n<extract>\n<edit>\n{noise}"),
    ] {
        let o = run(&text, Mode::Trawl);
        assert!(
            o.warnings
                .iter()
                .any(|w| matches!(w, Warning::Oversized { .. }))
        );
        if let Some(t) = &o.text {
            assert!(t.lines().all(|l| page().iter().any(|p| p.contains(l))));
        }
        let _ = run(&text, Mode::Python);
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn random_program(r: &mut Rng, n: u64) -> (String, Vec<(u64, u64)>) {
    let tags = [
        "<keep>",
        "<edit>",
        "<delete>",
        "<rewrite>",
        "<extract>",
        "<keep",
        "",
        "rm 1",
    ];
    let dec = tags[r.below(4) as usize];
    let mut s = format!("{dec}\n<extract>\n");
    let mut ranges = Vec::new();
    for _ in 0..r.below(6) {
        let a = r.below(n + 3);
        let b = if r.below(2) == 0 { a } else { r.below(n + 3) };
        ranges.push((a, b));
        s.push_str(&format!("rm {a}-{b}\n"));
    }
    s.push_str(tags[r.below(tags.len() as u64) as usize]);
    s.push('\n');
    for _ in 0..r.below(4) {
        match r.below(4) {
            0 => s.push_str(&format!("rm {}\n", r.below(n + 2))),
            1 => s.push_str(&format!("sub {}: \"words \"\n", r.below(n + 2))),
            2 => s.push_str("some words of a rewrite\n"),
            _ => s.push('\n'),
        }
    }
    (s, ranges)
}

/// Random programs over random pages: no panic, text copied from the page for keep and
/// edit, and the two readings agree on every well-formed rm-only `<keep>`.
#[test]
fn random_programs_keep_the_contract() {
    let mut r = Rng(0x2545f4914f6cdd1d);
    for case in 0..4000 {
        let n = r.below(12);
        let lines: Vec<String> = (0..n).map(|i| format!("line {i} of words o")).collect();
        let (text, ranges) = random_program(&mut r, n);
        let finish = if r.below(5) == 0 {
            Finish::Length
        } else {
            Finish::Stop
        };
        let g = Generation {
            text: text.clone(),
            finish,
        };
        let t = execute(&lines, &g, Mode::Trawl);
        let p = execute(&lines, &g, Mode::Python);
        if matches!(t.decision, Some(Decision::Keep | Decision::Edit))
            && let Some(out) = &t.text
        {
            for l in out.lines() {
                let from_page = lines.iter().any(|p| {
                    l.split_whitespace()
                        .all(|w| p.split_whitespace().any(|pw| pw == w))
                });
                assert!(from_page, "case {case}: {l:?} not from the page");
            }
        }
        if text.starts_with("<keep>\n")
            && finish == Finish::Stop
            && text.lines().nth(2 + ranges.len()) == Some("<keep>")
        {
            assert_eq!(t.text, p.text, "case {case}: {text:?}");
            let kept: Vec<&String> = lines
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    !ranges
                        .iter()
                        .any(|&(a, b)| a <= (*i as u64 + 1) && (*i as u64 + 1) <= b)
                })
                .map(|(_, l)| l)
                .collect();
            assert_eq!(
                t.text.as_deref().unwrap_or(""),
                kept.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                "case {case}"
            );
        }
    }
}
