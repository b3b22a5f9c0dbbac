//! A re-crawl's comparison of each page with the earlier crawl, cheapest check first: a
//! 304; the same payload digest; the same text hash (only markup or the host's boilerplate
//! changed); else changed, with the SimHash distance and a diff of the Markdown. A 404 or
//! 410 is removed at once; a 5xx or a network failure only after [`REMOVE_AFTER_FAILURES`]
//! in a row (the earlier record is kept meanwhile). Unchanged pages are carried forward
//! and never reach the index; each new, changed or removed page is one [`ChangeEvent`].

use std::sync::Arc;

use chrono::{DateTime, Utc};
use similar::{ChangeTag, DiffTag, TextDiff};
use trawl_core::change::{ChangeEvent, ChangeStatus, PageChange, Snapshot, TextChange};
use trawl_core::history::{History, Prior, Unlinked};
use trawl_core::{CoreResult, MESSAGE_VERSION, PageRecord};

/// Consecutive failed fetches (5xx, timeouts, refused connections) that make a page removed.
pub const REMOVE_AFTER_FAILURES: u32 = 3;
/// The diff in an event is cut here (the event stays a reasonable webhook body).
pub const DIFF_CAP_BYTES: usize = 16 * 1024;

/// The adaptive revisit interval (StormCrawler's form): a change moves it toward `min_s`,
/// an unchanged fetch grows it by `rate` up to `max_s`.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub min_s: u64,
    pub base_s: u64,
    pub max_s: u64,
    pub rate: f64,
}

impl Default for Schedule {
    /// Documentation sites: a day to start, between an hour and two weeks.
    fn default() -> Self {
        Schedule {
            min_s: 3600,
            base_s: 86_400,
            max_s: 14 * 86_400,
            rate: 0.5,
        }
    }
}

impl Schedule {
    pub fn from_settings(s: &trawl_core::settings::CrawlSettings) -> Schedule {
        Schedule {
            min_s: s.revisit_min_s,
            base_s: s.revisit_start_s,
            max_s: s.revisit_max_s,
            ..Schedule::default()
        }
    }

    pub fn after(&self, status: ChangeStatus, prior: Option<u64>) -> u64 {
        let i = prior.unwrap_or(self.base_s) as f64;
        let next = match status {
            ChangeStatus::Same => i * (1.0 + self.rate),
            ChangeStatus::Changed => (1.0 - self.rate) * i + self.rate * self.min_s as f64,
            ChangeStatus::New | ChangeStatus::Removed => self.base_s as f64,
        };
        (next.round() as u64).clamp(self.min_s, self.max_s)
    }
}

/// What the writer needs for a re-crawl.
pub struct Recrawl {
    pub history: Arc<dyn History>,
    pub crawl: String,
    /// The earlier crawl's id.
    pub since: String,
    pub schedule: Schedule,
    /// URLs admitted only by the end-of-crawl check of the earlier crawl's URLs.
    pub unlinked: Arc<dyn Unlinked>,
}

/// What the index does with a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexAction {
    /// Index it (new, changed, or a first crawl's page).
    Add,
    /// Unchanged: its rows stay as they are.
    Keep,
    /// Take out the rows of the page indexed under this canonical URL.
    Remove(String),
}

impl IndexAction {
    /// Read off the written record alone, so the writer and a resumed crawl replaying
    /// `pages.jsonl` decide alike.
    pub fn of(page: &PageRecord) -> IndexAction {
        // A page whose text is the same but which now says noindex (or reserves search)
        // must leave the index all the same.
        let unwanted = trawl_index::indexer::excluded(page, &[]).is_some();
        match page.change.as_ref() {
            Some(c) if c.status == ChangeStatus::Same && unwanted => {
                IndexAction::Remove(trawl_index::indexer::canonical_url(page).to_string())
            }
            Some(c) if c.status == ChangeStatus::Same => IndexAction::Keep,
            Some(c) if c.status == ChangeStatus::Removed => match &c.unindexed {
                Some(canonical) => IndexAction::Remove(canonical.clone()),
                None => IndexAction::Keep,
            },
            _ => IndexAction::Add,
        }
    }
}

pub struct Outcome {
    pub page: PageRecord,
    pub event: Option<ChangeEvent>,
}

impl Recrawl {
    /// The page compared with the earlier crawl. Sitemaps and feeds are compared too (their
    /// records say how they stand) but make no events: a listing that changed is news
    /// about its pages, which are events of their own.
    pub async fn classify(&self, page: PageRecord, now: DateTime<Utc>) -> CoreResult<Outcome> {
        let listing = page.kind != trawl_core::UrlKind::Page;
        let mut out = self.compare(page, now).await?;
        if listing {
            out.event = None;
        }
        Ok(out)
    }

    async fn compare(&self, page: PageRecord, now: DateTime<Utc>) -> CoreResult<Outcome> {
        let linked = !self.unlinked.contains(&page.url).await?;
        let prior = self.history.prior(&page.url).await?.filter(Prior::was_ok);
        let Some(prior) = prior else {
            return Ok(self.new_page(page, linked, now));
        };
        // A 2xx is the page, even when it is recorded without extraction (not HTML, cut at
        // the body cap, extraction failed): it is compared, not reported removed.
        let ok = (200..300).contains(&page.status)
            && page.error.as_ref().is_none_or(|e| {
                matches!(
                    e.kind.as_str(),
                    "unsupported_content_type"
                        | "body_too_large"
                        | "extract_failed"
                        | "document_unreadable"
                        | "document_too_large"
                        | "document_encrypted"
                        | "document_timeout"
                        | "document_failed"
                )
            });
        let failed = page.status >= 500
            || page.status == 429
            || page.error.as_ref().is_some_and(|e| {
                matches!(
                    e.kind.as_str(),
                    "timeout" | "connect" | "dns" | "request" | "body"
                )
            });
        if page.status == 304 && page.redirects.is_empty() {
            // Not requested (not due yet): the schedule stands as it was.
            let mut carried = self.carry(page, &prior).await?;
            let mut c = self.mark(ChangeStatus::Same, &prior, linked, now, prior.fails);
            c.reason = Some("not_due".into());
            carried.fetched_at = prior.fetched_at.clone();
            c.interval_s = prior.interval_s.unwrap_or(self.schedule.base_s);
            if let Some(due) = &prior.next_due {
                c.next_due = due.clone();
            }
            carried.change = Some(c);
            return Ok(Outcome {
                page: carried,
                event: None,
            });
        }
        if page.status == 304 {
            let carried = self.carry(page, &prior).await?;
            return Ok(self.same(carried, &prior, "not_modified", linked, now));
        }
        if (300..400).contains(&page.status) {
            // A redirect whose target was crawled already (or is out of scope): the
            // content lives on elsewhere, so the index keeps what it has.
            let mut o = self
                .removed(page, prior, "redirected".into(), linked, now)
                .await?;
            if let Some(c) = o.page.change.as_mut() {
                c.unindexed = None;
            }
            return Ok(o);
        }
        if ok
            && page.facts.payload_digest.is_some()
            && page.facts.payload_digest == prior.facts.payload_digest
        {
            return Ok(self.same(page, &prior, "same_payload", linked, now));
        }
        if ok && page.text_hash.is_some() && page.text_hash == prior.text_hash {
            return Ok(self.same(page, &prior, "same_text", linked, now));
        }
        if ok {
            return self.changed(page, prior, linked, now).await;
        }
        if failed && prior.fails + 1 < REMOVE_AFTER_FAILURES {
            let mut carried = self.carry(page, &prior).await?;
            let fails = prior.fails + 1;
            carried.change = Some(self.mark(ChangeStatus::Same, &prior, linked, now, fails));
            if let Some(c) = carried.change.as_mut() {
                // Asked again soon: removal should not wait for the page's long interval.
                c.reason = Some("fetch_failed".into());
                c.interval_s = self.schedule.min_s;
                c.next_due = rfc3339(now + chrono::Duration::seconds(self.schedule.min_s as i64));
            }
            return Ok(Outcome {
                page: carried,
                event: None,
            });
        }
        let reason = match (page.status, page.error.as_ref().map(|e| e.kind.as_str())) {
            (404, _) => "not_found".to_string(),
            (410, _) => "gone".to_string(),
            (_, Some("robots_disallowed")) => "robots".to_string(),
            _ if failed => "unreachable".to_string(),
            (s, Some(kind)) if s == 0 || (200..300).contains(&s) => kind.to_string(),
            (s, _) => format!("http_{s}"),
        };
        self.removed(page, prior, reason, linked, now).await
    }

    fn mark(
        &self,
        status: ChangeStatus,
        prior: &Prior,
        linked: bool,
        now: DateTime<Utc>,
        fails: u32,
    ) -> PageChange {
        let interval_s = self.schedule.after(status, prior.interval_s);
        let changed_at = match status {
            ChangeStatus::Same => prior
                .changed_at
                .clone()
                .unwrap_or_else(|| prior.fetched_at.clone()),
            _ => rfc3339(now),
        };
        PageChange {
            status,
            reason: None,
            distance: None,
            linked,
            changed_at,
            interval_s,
            next_due: rfc3339(now + chrono::Duration::seconds(interval_s as i64)),
            fails,
            unindexed: None,
        }
    }

    fn new_page(&self, mut page: PageRecord, linked: bool, now: DateTime<Utc>) -> Outcome {
        let ok = (200..300).contains(&page.status) && page.error.is_none();
        let interval_s = self.schedule.base_s;
        page.change = Some(PageChange {
            status: ChangeStatus::New,
            reason: None,
            distance: None,
            linked,
            changed_at: rfc3339(now),
            interval_s,
            next_due: rfc3339(now + chrono::Duration::seconds(interval_s as i64)),
            fails: 0,
            unindexed: None,
        });
        let event = ok.then(|| self.event(&page, None, None, now));
        Outcome { page, event }
    }

    fn same(
        &self,
        mut page: PageRecord,
        prior: &Prior,
        reason: &str,
        linked: bool,
        now: DateTime<Utc>,
    ) -> Outcome {
        let mut c = self.mark(ChangeStatus::Same, prior, linked, now, 0);
        c.reason = Some(reason.to_string());
        page.change = Some(c);
        Outcome { page, event: None }
    }

    async fn changed(
        &self,
        mut page: PageRecord,
        prior: Prior,
        linked: bool,
        now: DateTime<Utc>,
    ) -> CoreResult<Outcome> {
        let previous = self.history.previous(&page.url).await?;
        let mut c = self.mark(ChangeStatus::Changed, &prior, linked, now, 0);
        c.distance = distance(page.simhash.as_deref(), prior.simhash.as_deref());
        page.change = Some(c);
        let old = previous.as_ref().map(body).unwrap_or_default();
        let diff = text_change(old, body(&page), DIFF_CAP_BYTES);
        let event = self.event(&page, Some(&prior), Some(diff), now);
        Ok(Outcome {
            page,
            event: Some(event),
        })
    }

    async fn removed(
        &self,
        mut page: PageRecord,
        prior: Prior,
        reason: String,
        linked: bool,
        now: DateTime<Utc>,
    ) -> CoreResult<Outcome> {
        let previous = self.history.previous(&page.url).await?;
        let canonical = previous
            .as_ref()
            .map(|p| trawl_index::indexer::canonical_url(p).to_string())
            .unwrap_or_else(|| prior.final_url.clone());
        // Rows indexed under another page's URL (a declared canonical) belong to that page
        // as long as it is there: only the page's own rows go.
        let own = canonical == page.url || canonical == prior.final_url;
        let fails = if reason == "unreachable" {
            prior.fails + 1
        } else {
            0
        };
        let mut c = self.mark(ChangeStatus::Removed, &prior, linked, now, fails);
        c.reason = Some(reason);
        c.unindexed = own.then_some(canonical);
        page.change = Some(c);
        let event = self.event(&page, Some(&prior), None, now);
        Ok(Outcome {
            page,
            event: Some(event),
        })
    }

    /// The earlier record, with this fetch's time, transfer and response facts: the page
    /// the corpus keeps when the server says nothing changed (or cannot be reached).
    async fn carry(&self, page: PageRecord, prior: &Prior) -> CoreResult<PageRecord> {
        let Some(mut old) = self.history.previous(&page.url).await? else {
            let mut p = page;
            p.status = prior.status;
            return Ok(p);
        };
        old.fetched_at = page.fetched_at;
        old.wire_bytes = page.wire_bytes;
        old.redirects = page.redirects;
        if page.status == 304 {
            old.facts = page.facts;
        }
        Ok(old)
    }

    fn event(
        &self,
        page: &PageRecord,
        prior: Option<&Prior>,
        diff: Option<TextChange>,
        now: DateTime<Utc>,
    ) -> ChangeEvent {
        let c = page.change.as_ref();
        let status = c.map_or(ChangeStatus::New, |c| c.status);
        let current = (status != ChangeStatus::Removed).then(|| Snapshot {
            fetched_at: page.fetched_at.clone(),
            text_hash: page.text_hash.clone(),
            simhash: page.simhash.clone(),
            etag: page.facts.etag.clone(),
            last_modified: page.facts.last_modified.clone(),
        });
        let previous = prior.map(|p| Snapshot {
            fetched_at: p.fetched_at.clone(),
            text_hash: p.text_hash.clone(),
            simhash: p.simhash.clone(),
            etag: p.facts.etag.clone(),
            last_modified: p.facts.last_modified.clone(),
        });
        ChangeEvent {
            v: MESSAGE_VERSION,
            id: event_id(&page.url, status, page.text_hash.as_deref(), &self.crawl),
            kind: format!("page.{}", status.as_str()),
            crawl: self.crawl.clone(),
            since: self.since.clone(),
            at: rfc3339(now),
            url: page.url.clone(),
            final_url: page.final_url.clone(),
            status,
            reason: c.and_then(|c| c.reason.clone()),
            http_status: page.status,
            linked: c.is_none_or(|c| c.linked),
            title: page.title.clone(),
            previous,
            current,
            distance: c.and_then(|c| c.distance),
            diff,
        }
    }
}

/// The same change of the same page in the same crawl has the same id, so a redelivered
/// event (a resumed crawl, a retried webhook) can be recognized.
pub fn event_id(url: &str, status: ChangeStatus, text_hash: Option<&str>, crawl: &str) -> String {
    let key = format!(
        "{crawl}\n{url}\n{}\n{}",
        status.as_str(),
        text_hash.unwrap_or("")
    );
    format!("chg_{:032x}", xxhash_rust::xxh3::xxh3_128(key.as_bytes()))
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn body(p: &PageRecord) -> &str {
    p.markdown.as_deref().unwrap_or(&p.text)
}

fn distance(a: Option<&str>, b: Option<&str>) -> Option<u32> {
    let a = u64::from_str_radix(a?, 16).ok()?;
    let b = u64::from_str_radix(b?, 16).ok()?;
    Some((a ^ b).count_ones())
}

/// The heading path of every line of a Markdown document.
fn heading_paths(doc: &str) -> Vec<String> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut out = Vec::new();
    for line in doc.lines() {
        let level = line.bytes().take_while(|b| *b == b'#').count();
        if (1..=6).contains(&level) && line.as_bytes().get(level) == Some(&b' ') {
            stack.retain(|(l, _)| *l < level);
            stack.push((level, line[level..].trim().to_string()));
        }
        let path: Vec<&str> = stack.iter().map(|(_, t)| t.as_str()).collect();
        out.push(path.join(" › "));
    }
    out
}

/// A unified diff of two Markdown texts, line by line, with the heading paths of the
/// changed sections; the text is cut at `cap` bytes.
pub fn text_change(old: &str, new: &str, cap: usize) -> TextChange {
    let diff = TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for c in diff.iter_all_changes() {
        match c.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let old_paths = heading_paths(old);
    let new_paths = heading_paths(new);
    let mut headings: Vec<String> = Vec::new();
    for op in diff.ops() {
        let path = match op.tag() {
            DiffTag::Equal => continue,
            DiffTag::Delete => old_paths.get(op.old_range().start),
            DiffTag::Insert | DiffTag::Replace => new_paths.get(op.new_range().start),
        };
        if let Some(p) = path.filter(|p| !p.is_empty())
            && !headings.contains(p)
        {
            headings.push(p.clone());
        }
    }
    let unified = diff.unified_diff();
    let mut unified = unified;
    unified.context_radius(3).header("previous", "current");
    let hunks = unified.iter_hunks().count();
    let mut text = unified.to_string();
    let truncated = text.len() > cap;
    if truncated {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    TextChange {
        format: "unified".into(),
        added,
        removed,
        hunks,
        headings,
        text,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use trawl_core::history::KnownPage;
    use trawl_core::{FetchFailure, ResponseFacts};

    use super::*;

    /// An earlier crawl in memory.
    #[derive(Default)]
    struct Earlier {
        priors: HashMap<String, Prior>,
        records: HashMap<String, PageRecord>,
    }

    #[async_trait::async_trait]
    impl History for Earlier {
        async fn prior(&self, url: &str) -> CoreResult<Option<Prior>> {
            Ok(self.priors.get(url).cloned())
        }
        async fn previous(&self, url: &str) -> CoreResult<Option<PageRecord>> {
            Ok(self.records.get(url).cloned())
        }
        async fn known(&self, _: Option<String>) -> CoreResult<KnownPage> {
            Ok(KnownPage::default())
        }
    }

    fn record(url: &str, status: u16, digest: &str) -> PageRecord {
        PageRecord {
            url: url.into(),
            final_url: url.into(),
            status,
            fetched_at: "2026-12-01T00:00:00Z".into(),
            text: "some text".into(),
            text_hash: Some("aa".into()),
            redirects: vec![trawl_core::Hop {
                url: url.into(),
                status,
            }],
            facts: ResponseFacts {
                payload_digest: Some(digest.into()),
                ..ResponseFacts::default()
            },
            ..PageRecord::default()
        }
    }

    fn recrawl(pages: &[PageRecord]) -> Recrawl {
        let mut e = Earlier::default();
        for p in pages {
            e.priors.insert(
                p.url.clone(),
                Prior {
                    status: p.status,
                    final_url: p.final_url.clone(),
                    facts: p.facts.clone(),
                    text_hash: p.text_hash.clone(),
                    fetched_at: p.fetched_at.clone(),
                    has_record: true,
                    ..Prior::default()
                },
            );
            e.records.insert(p.url.clone(), p.clone());
        }
        Recrawl {
            history: Arc::new(e),
            crawl: "c2".into(),
            since: "c1".into(),
            schedule: Schedule::default(),
            unlinked: Arc::new(trawl_core::history::MemoryUnlinked::default()),
        }
    }

    #[tokio::test]
    async fn what_is_still_there_is_not_removed_and_other_pages_rows_stay() {
        let now = Utc::now();
        let mut pdf = record("http://a/doc.pdf", 200, "sha1:PDF");
        pdf.error = Some(FetchFailure {
            kind: "unsupported_content_type".into(),
            message: "not HTML".into(),
        });
        let mut latest = record("http://a/latest/x", 200, "sha1:L");
        latest.meta.canonical = Some("http://a/1.2/x".into());
        let own = record("http://a/own", 200, "sha1:O");
        let moved = record("http://a/moved", 200, "sha1:M");
        let flaky = record("http://a/flaky", 200, "sha1:F");
        let r = recrawl(&[
            pdf.clone(),
            latest.clone(),
            own.clone(),
            moved.clone(),
            flaky.clone(),
        ]);

        // A non-HTML page recorded without extraction, unchanged: the same.
        let o = r.classify(pdf, now).await.unwrap();
        assert_eq!(o.page.change.as_ref().unwrap().status, ChangeStatus::Same);
        assert_eq!(
            (IndexAction::of(&o.page), o.event.is_none()),
            (IndexAction::Keep, true)
        );

        // Gone, but indexed under another page's URL: that page's rows stay.
        let o = r
            .classify(record("http://a/latest/x", 404, ""), now)
            .await
            .unwrap();
        assert_eq!(
            o.page.change.as_ref().unwrap().status,
            ChangeStatus::Removed
        );
        assert_eq!(IndexAction::of(&o.page), IndexAction::Keep);
        assert!(crate::IndexItem::of_line(o.page.clone(), 9).is_none());
        // Gone, its own rows: removed from the index.
        let o = r
            .classify(record("http://a/own", 410, ""), now)
            .await
            .unwrap();
        assert_eq!(
            IndexAction::of(&o.page),
            IndexAction::Remove("http://a/own".into())
        );
        // A resumed crawl replaying the line removes the same rows.
        let replayed = crate::IndexItem::of_line(o.page.clone(), 9);
        assert!(
            matches!(&replayed, Some(crate::IndexItem::Remove(c, 9)) if c == "http://a/own"),
            "{replayed:?}"
        );
        assert_eq!(o.event.unwrap().reason.as_deref(), Some("gone"));

        // A redirect to a page crawled already: reported, no rows deleted.
        let o = r
            .classify(record("http://a/moved", 301, ""), now)
            .await
            .unwrap();
        assert_eq!(
            o.page.change.as_ref().unwrap().reason.as_deref(),
            Some("redirected")
        );
        assert_eq!(IndexAction::of(&o.page), IndexAction::Keep);
        assert!(crate::IndexItem::of_line(o.page.clone(), 9).is_none());

        // A first failure keeps the earlier record and asks again within the minimum.
        let o = r
            .classify(record("http://a/flaky", 503, ""), now)
            .await
            .unwrap();
        let c = o.page.change.as_ref().unwrap();
        assert_eq!((c.status, c.fails), (ChangeStatus::Same, 1));
        assert_eq!(o.page.text, "some text");
        let due = chrono::DateTime::parse_from_rfc3339(&c.next_due).unwrap();
        assert!(due.timestamp() - now.timestamp() <= r.schedule.min_s as i64 + 1);
    }

    #[test]
    fn a_diff_names_the_sections_that_changed() {
        let old = "# Guide\n\nIntro.\n\n## Install\n\nRun make.\n\n## Use\n\nCall run().\n";
        let new = "# Guide\n\nIntro.\n\n## Install\n\nRun make install.\n\n## Use\n\nCall run().\n";
        let d = text_change(old, new, DIFF_CAP_BYTES);
        assert_eq!((d.added, d.removed, d.hunks), (1, 1, 1));
        assert_eq!(d.headings, vec!["Guide › Install".to_string()]);
        assert!(
            d.text.contains("-Run make.\n+Run make install."),
            "{}",
            d.text
        );
        assert!(!d.truncated);
        let cut = text_change(old, new, 20);
        assert!(cut.truncated && cut.text.len() <= 20);
    }

    #[test]
    fn the_revisit_interval_stays_in_its_bounds() {
        // A page that changes every 30 days, fetched daily (Nutch's simulation): the
        // interval grows while it is unchanged and falls back when it changes.
        let s = Schedule::default();
        let mut i = None;
        let mut seen = Vec::new();
        for day in 1..=180 {
            let status = if day % 30 == 0 {
                ChangeStatus::Changed
            } else {
                ChangeStatus::Same
            };
            let next = s.after(status, i);
            assert!((s.min_s..=s.max_s).contains(&next), "{next}");
            seen.push(next);
            i = Some(next);
        }
        assert_eq!(
            seen[28], s.max_s,
            "unchanged for a month: the longest interval"
        );
        assert!(seen[29] < seen[28], "a change shortens it");
    }

    #[test]
    fn event_ids_are_stable_per_change() {
        let a = event_id("http://a/", ChangeStatus::Changed, Some("ff"), "c2");
        assert_eq!(
            a,
            event_id("http://a/", ChangeStatus::Changed, Some("ff"), "c2")
        );
        assert_ne!(
            a,
            event_id("http://a/", ChangeStatus::Changed, Some("fe"), "c2")
        );
        assert_ne!(
            a,
            event_id("http://a/", ChangeStatus::Removed, Some("ff"), "c2")
        );
    }
}
