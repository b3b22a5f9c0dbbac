//! `trawl-notifier`: delivers a re-crawl's change events from `trawl.changed` to the
//! crawl's webhook (`trawl submit --webhook URL`), signed with `TRAWL_WEBHOOK_SECRET`; an
//! event is acked once the receiver answered 2xx, retried with backoff, and moved to the
//! dead-letter stream when it cannot be delivered.

use trawl_cluster::service::{self, Stage};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    service::run(Stage::Notifier, |ctx, _| trawl_notifier::serve(ctx)).await
}
