//! The model-free teacher: trawl's own main-content extractor written as an `<extract>`
//! program over the rendered lines (the role Dripper plays for ReScraper), so refinement
//! runs with no model and its (page, program) pairs can train one.
//!
//! A rendered line is kept when the extracted text holds it: whole (a line of three words
//! or more found inside the extracted text, or a shorter one equal to an extracted line) or
//! mostly (60% of its word pairs, or of its character 6-grams where words are not spaced).

use std::collections::{HashMap, HashSet};

use url::Url;

/// Lines kept and the program that keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct Teaching {
    pub keep: Vec<bool>,
    pub program: String,
}

fn norm(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut gap = false;
    for c in s.chars() {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.extend(c.to_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

fn pairs(n: &str) -> Vec<(&str, &str)> {
    let w: Vec<&str> = n.split(' ').collect();
    w.windows(2).map(|p| (p[0], p[1])).collect()
}

fn grams(n: &str) -> Vec<String> {
    let c: Vec<char> = n.chars().filter(|c| *c != ' ').collect();
    c.windows(6).map(|w| w.iter().collect()).collect()
}

/// Which of `lines` the extracted `text` keeps.
pub fn teach(lines: &[String], text: &str) -> Teaching {
    let whole = format!(" {} ", norm(text));
    let ext_lines: HashSet<String> = text.lines().map(norm).filter(|l| !l.is_empty()).collect();
    let flat = norm(text);
    let pair_set: HashSet<(&str, &str)> = pairs(&flat).into_iter().collect();
    let gram_set: HashSet<String> = grams(&flat).into_iter().collect();
    // A line found whole is kept as many times as the extracted text holds it: a title
    // rendered from <title>, og:title and <h1> counts once.
    let mut budget: HashMap<String, usize> = HashMap::new();
    let mut scan_budget: usize = 4_000_000_000;
    let keep: Vec<bool> = lines
        .iter()
        .map(|l| {
            let n = norm(l);
            if n.is_empty() {
                return false;
            }
            let words = n.split(' ').count();
            // Searching the whole extracted text for each line is lines x text: past a
            // budget (a page of tens of thousands of lines) only exact lines and pairs count.
            let search = scan_budget > 0;
            if search {
                scan_budget = scan_budget.saturating_sub(whole.len());
            }
            if (words >= 3 && search && whole.contains(&format!(" {n} "))) || ext_lines.contains(&n)
            {
                let left = budget.entry(n.clone()).or_insert_with(|| {
                    if search {
                        whole.matches(&format!(" {n} ")).count().max(1)
                    } else {
                        1
                    }
                });
                if *left == 0 {
                    return false;
                }
                *left -= 1;
                return true;
            }
            if words >= 3 {
                let p = pairs(&n);
                let hit = p.iter().filter(|x| pair_set.contains(x)).count();
                return hit * 10 >= p.len() * 8;
            }
            let g = grams(&n);
            if g.len() >= 4 && words == 1 {
                let hit = g.iter().filter(|x| gram_set.contains(*x)).count();
                return hit * 10 >= g.len() * 6;
            }
            false
        })
        .collect();
    let program = program_for(&keep);
    Teaching { keep, program }
}

/// `<keep>` with the removed lines as `rm` ranges, or `<delete>` when nothing is kept.
pub fn program_for(keep: &[bool]) -> String {
    if !keep.iter().any(|k| *k) {
        return "<delete>\n<extract>\n<delete>".into();
    }
    let mut s = String::from("<keep>\n<extract>\n");
    let mut i = 0;
    while i < keep.len() {
        if keep[i] {
            i += 1;
            continue;
        }
        let a = i;
        while i < keep.len() && !keep[i] {
            i += 1;
        }
        if i - a == 1 {
            s.push_str(&format!("rm {}\n", a + 1));
        } else {
            s.push_str(&format!("rm {}-{}\n", a + 1, i));
        }
    }
    s.push_str("<keep>");
    s
}

/// Renders and teaches one page: its lines and trawl's extract program over them.
pub fn teach_page(html: &str, url: &Url) -> (Vec<String>, Teaching) {
    let lines = crate::lines::render_lines(html);
    let doc = trawl_extract::extract_html(html, url);
    let t = teach(&lines, &doc.text);
    (lines, t)
}
