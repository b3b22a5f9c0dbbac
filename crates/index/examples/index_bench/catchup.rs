//! `catchup CHUNKS DIR ROWS`: where an index update's time goes on a big table. ROWS new
//! rows (grown like `search`'s) are added to the table `search` left in DIR (`KEEP=1`),
//! then each of its indexes is brought up to date on its own with the product's
//! `Store::catch_up`, and timed.

use std::time::Instant;

use serde_json::{Value, json};
use trawl_index::store::Store;

use crate::scale::{CHUNKS_PER_PAGE, batch, real_vectors};
use crate::synth::Synth;
use crate::{read_chunks, rows};

pub async fn run(args: &[String]) {
    let texts = read_chunks(&args[0]);
    let dir = &args[1];
    let add: usize = args[2].parse().expect("rows");
    let store = Store::open_existing(dir).await.expect("open");
    let (have, _) = store.count().await.expect("count");
    let mut synth = Synth::new(real_vectors(&args[0], &texts), 0x5eed);
    let t = Instant::now();
    let mut n = 0;
    while n < add {
        let len = 20_000.min(add - n);
        let from = have + n;
        let (ts, vs) = batch(&mut synth, &texts, from, len);
        store
            .add(&rows(&ts, vs, from, CHUNKS_PER_PAGE), &[])
            .await
            .expect("add");
        n += len;
    }
    let write_s = t.elapsed().as_secs_f64();
    let mut indexes = Vec::new();
    for idx in store.chunks().list_indices().await.expect("indices") {
        let before = store.chunks().index_stats(&idx.name).await.expect("stats");
        let t = Instant::now();
        store.catch_up(&idx.name).await.expect("catch up");
        let s = t.elapsed().as_secs_f64();
        let after = store.chunks().index_stats(&idx.name).await.expect("stats");
        let segments = |st: &Option<lancedb::index::IndexStatistics>| -> Value {
            json!(st.as_ref().and_then(|s| s.num_indices))
        };
        indexes.push(json!({
            "columns": idx.columns, "s": s,
            "segments_before": segments(&before), "segments_after": segments(&after),
        }));
        eprintln!("{}", indexes[indexes.len() - 1]);
    }
    println!(
        "{}",
        json!({"rows_before": have, "rows_added": add, "write_s": write_s, "indexes": indexes})
    );
}
