//! ReScraper's post-filter (`inference/postfilter.py`), applied to every refined text: a
//! text that still carries program syntax is dropped.

const TAGS: &[&str] = &[
    "<keep>",
    "<edit>",
    "<delete>",
    "<rewrite>",
    "<extract>",
    "<refine>",
];

fn op_line(l: &str) -> bool {
    // ^(rm \d+(-\d+)?(:\d+)?|sub \d+: )
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if let Some(r) = l.strip_prefix("rm ") {
        return digits(r) > 0;
    }
    if let Some(r) = l.strip_prefix("sub ") {
        let d = digits(r);
        return d > 0 && r[d..].starts_with(": ");
    }
    false
}

/// The rule a text breaks (A2: op lines or a short text opening with a tag; A5: a line that
/// is a tag alone), or `None`.
pub fn reject(text: &str) -> Option<&'static str> {
    if text.lines().filter(|l| op_line(l)).count() >= 2 {
        return Some("A2: program lines in the text");
    }
    let t = text.trim_start();
    if t.chars().count() < 200 && TAGS.iter().any(|g| t.starts_with(g)) {
        return Some("A2: a short text opening with a tag");
    }
    if text.lines().any(|l| TAGS.contains(&l.trim())) {
        return Some("A5: a line that is a tag alone");
    }
    None
}
