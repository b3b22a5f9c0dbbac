//! Outputs sized to the hop's message limit (the cluster's NATS `max_payload`). A sitemap
//! of 50,000 URLs or a page of megabytes of text would otherwise fail its publish, restart
//! the stage and, redelivered until its delivery limit, end in the dead letters: a batch of
//! discovered URLs is split into batches that fit, and a record that does not fit is cut
//! (Markdown first, then text) and marked `record_too_large`, as a body past the fetcher's
//! cap is kept cut and marked `body_too_large`.

use trawl_core::{Discovered, Doc, FetchFailure, RefineJob};

/// Room left for the message's headers and framing.
const HEADROOM: usize = 4 << 10;

fn encoded_len<T: serde::Serialize>(m: &T) -> usize {
    serde_json::to_vec(m).map_or(usize::MAX, |v| v.len())
}

/// `batch` as batches whose encoding fits in `max` bytes each (one URL too long to fit
/// alone is dropped: no URL is that long after the frontier's length trap).
pub(crate) fn split_discovered(batch: Discovered, max: usize) -> Vec<Discovered> {
    let budget = max.saturating_sub(HEADROOM).max(1);
    if encoded_len(&batch) <= budget {
        return vec![batch];
    }
    let empty = Discovered {
        urls: Vec::new(),
        ..batch.clone()
    };
    let base = encoded_len(&empty);
    let mut out = Vec::new();
    let mut cur = empty.clone();
    let mut size = base;
    for u in batch.urls {
        let n = encoded_len(&u) + 1;
        if base + n > budget {
            tracing::warn!(
                len = u.url.len(),
                "a discovered URL too long for one message dropped"
            );
            continue;
        }
        if size + n > budget {
            out.push(std::mem::replace(&mut cur, empty.clone()));
            size = base;
        }
        size += n;
        cur.urls.push(u);
    }
    if !cur.urls.is_empty() {
        out.push(cur);
    }
    out
}

/// Cuts the record's Markdown, then its text, until the message fits in `max` bytes.
pub fn fit_doc(doc: &mut Doc, max: usize) {
    let budget = max.saturating_sub(HEADROOM);
    let before = encoded_len(doc);
    if before <= budget {
        return;
    }
    // The kept markup goes first: the extracted text is the record's point.
    if doc.page.raw_html.take().is_some() && encoded_len(doc) <= budget {
        doc.page.error.get_or_insert_with(|| FetchFailure {
            kind: "record_too_large".into(),
            message: format!(
                "the record ({before} bytes) did not fit a message of {max} bytes: its raw_html was left out"
            ),
        });
        return;
    }
    // JSON escapes can make the encoding larger than the string: measure again each round.
    for _ in 0..8 {
        let len = encoded_len(doc);
        if len <= budget {
            break;
        }
        let excess = len - budget;
        let page = &mut doc.page;
        let field = match &mut page.markdown {
            Some(m) if !m.is_empty() => m,
            _ if !page.text.is_empty() => &mut page.text,
            _ => break,
        };
        let keep = floor_char_boundary(field, field.len().saturating_sub(excess + 1024));
        field.truncate(keep);
    }
    if doc.page.error.is_none() {
        doc.page.error = Some(FetchFailure {
            kind: "record_too_large".into(),
            message: format!("the record ({before} bytes) was cut to fit a message of {max} bytes"),
        });
    }
}

/// Cuts the refiner's markup until the message fits in `max` bytes, marking it `html_cut`
/// (the refiner renders what is left: a page's start holds its main text far more often
/// than its end, which is mostly scripts).
pub(crate) fn fit_refine(job: &mut RefineJob, max: usize) {
    let budget = max.saturating_sub(HEADROOM);
    for _ in 0..8 {
        let len = encoded_len(job);
        if len <= budget {
            return;
        }
        let excess = len - budget;
        let keep = floor_char_boundary(&job.html, job.html.len().saturating_sub(excess + 1024));
        job.html.truncate(keep);
        job.html_cut = true;
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_core::{DiscoveredUrl, MESSAGE_VERSION, PageRecord, UrlKind};

    #[test]
    fn a_large_batch_is_split_into_batches_that_fit() {
        let urls: Vec<DiscoveredUrl> = (0..50_000)
            .map(|i| DiscoveredUrl {
                url: format!("https://docs.example.org/some/long/path/to/page-{i}.html"),
                depth: 1,
                kind: UrlKind::Page,
                lastmod: Some("2026-11-30".into()),
            })
            .collect();
        let batch = Discovered {
            v: MESSAGE_VERSION,
            crawl: "c".into(),
            source: Some("https://docs.example.org/sitemap.xml".into()),
            urls: urls.clone(),
        };
        let max = 1 << 20;
        let parts = split_discovered(batch, max);
        assert!(parts.len() > 1);
        assert!(
            parts.iter().all(|p| encoded_len(p) <= max),
            "each part fits"
        );
        let back: Vec<DiscoveredUrl> = parts.into_iter().flat_map(|p| p.urls).collect();
        assert_eq!(back, urls, "every URL, in order");
    }

    #[test]
    fn a_refine_job_too_large_is_cut_and_marked() {
        let mut job = RefineJob {
            url: "https://h/big".into(),
            html: "<p>\"é\"</p>\n".repeat(200_000),
            ..RefineJob::default()
        };
        let max = 1 << 20;
        fit_refine(&mut job, max);
        assert!(encoded_len(&job) <= max);
        assert!(job.html_cut);
        assert!(job.html.starts_with("<p>"), "the start is kept");
        let mut small = RefineJob {
            html: "<p>x</p>".into(),
            ..RefineJob::default()
        };
        fit_refine(&mut small, max);
        assert!(!small.html_cut, "a job that fits is untouched");
    }

    #[test]
    fn a_record_too_large_is_cut_to_fit_and_marked() {
        let mut doc = Doc {
            v: MESSAGE_VERSION,
            crawl: "c".into(),
            page: PageRecord {
                url: "https://h/big".into(),
                text: "é\"\n".repeat(400_000),
                markdown: Some("**x** \"y\"\n".repeat(200_000)),
                ..PageRecord::default()
            },
        };
        let max = 1 << 20;
        fit_doc(&mut doc, max);
        assert!(encoded_len(&doc) <= max);
        assert_eq!(doc.page.error.as_ref().unwrap().kind, "record_too_large");
        assert!(!doc.page.text.is_empty(), "the text's start is kept");

        let mut small = Doc {
            v: MESSAGE_VERSION,
            crawl: "c".into(),
            page: PageRecord::default(),
        };
        fit_doc(&mut small, max);
        assert!(
            small.page.error.is_none(),
            "a record that fits is untouched"
        );
    }
}
