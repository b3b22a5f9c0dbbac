//! The vector index as the table grows: its partitions are split as rows come, so the rows
//! a query's probes read stay bounded, and search still finds each row's own vector.

use arrow_array::{Array, StringArray};
use futures_util::TryStreamExt;
use lance::index::DatasetIndexExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use trawl_index::Store;
use trawl_index::search::{NPROBES, REFINE_FACTOR};
use trawl_index::store::{ChunkRow, VECTOR_PARTITION_ROWS};

const DIM: usize = 8;

/// A number in [-1, 1) from `seed` (a splitmix step), so rows are spread and distinct.
fn unit(seed: u64) -> f32 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// Row `i`'s vector: one of 40 centres, moved off it by noise of its own.
fn vector(i: usize) -> Vec<f32> {
    let c = (i % 40) as u64;
    let mut v: Vec<f32> = (0..DIM as u64)
        .map(|d| unit(c * 1000 + d) + 0.3 * unit(((i as u64) << 8) + d + 1_000_000))
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn rows(range: std::ops::Range<usize>) -> Vec<ChunkRow> {
    range
        .map(|i| ChunkRow {
            id: format!("{i:032x}"),
            url: format!("http://v/{}", i / 4),
            canonical_url: format!("http://v/{}", i / 4),
            title: "v".into(),
            heading_path: vec![],
            position: (i % 4) as u32,
            chunks_in_page: 4,
            fetched_at_ms: 0,
            page_fingerprint: 0,
            chunk_hash: format!("{i:032x}"),
            chunk_simhash: i as u64,
            words: 2,
            tokens: 0,
            text: format!("row {i}"),
            vector: Some(vector(i)),
        })
        .collect()
}

/// The vector index's partitions, summed over its segments' largest count (a split
/// merges every segment into one).
async fn partitions(store: &Store) -> u64 {
    let name = &vector_index_name(store).await;
    let ds = store
        .chunks()
        .dataset()
        .expect("a local table")
        .get()
        .await
        .unwrap();
    let stats: serde_json::Value =
        serde_json::from_str(&ds.index_statistics(name).await.unwrap()).unwrap();
    stats["indices"]
        .as_array()
        .expect("segments")
        .iter()
        .filter_map(|s| s["num_partitions"].as_u64())
        .max()
        .expect("a partition count")
}

async fn vector_index_name(store: &Store) -> String {
    store
        .chunks()
        .list_indices()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.columns == ["vector"])
        .expect("a vector index")
        .name
}

async fn nearest(store: &Store, q: Vec<f32>) -> Vec<String> {
    let batches: Vec<arrow_array::RecordBatch> = store
        .chunks()
        .vector_search(q)
        .unwrap()
        .distance_type(lancedb::DistanceType::Cosine)
        .nprobes(NPROBES)
        .unwrap()
        .refine_factor(REFINE_FACTOR)
        .select(Select::columns(&["id"]))
        .limit(3)
        .execute()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    batches
        .iter()
        .flat_map(|b| {
            let ids = b["id"].as_any().downcast_ref::<StringArray>().unwrap();
            (0..ids.len())
                .map(|i| ids.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn a_vector_index_splits_its_partitions_as_the_table_grows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap(), Some(DIM))
        .await
        .unwrap();
    let first = VECTOR_PARTITION_ROWS as usize + 500;
    store.add(&rows(0..first), &[]).await.unwrap();
    let built = store.build_indexes(256).await.unwrap();
    assert!(built.contains(&"vector"), "{built:?}");
    assert_eq!(partitions(&store).await, 1, "trained for its rows");

    // Past four times the rows a partition was trained for, it is split.
    let total = first + 5 * VECTOR_PARTITION_ROWS as usize;
    store.add(&rows(first..total), &[]).await.unwrap();
    let built = store.build_indexes(256).await.unwrap();
    assert!(built.contains(&"vector (updated)"), "{built:?}");
    let after = partitions(&store).await;
    assert!(after >= 3, "one partition held {total} rows: {after}");
    let s = store
        .chunks()
        .index_stats(&vector_index_name(&store).await)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.num_unindexed_rows, 0, "{s:?}");
    assert_eq!(s.num_indexed_rows, total, "{s:?}");

    // Rows are still found by their own vectors, first (an approximate index: one miss
    // in twenty is allowed).
    let sample: Vec<usize> = (0..total).step_by(611).collect();
    let mut missed = Vec::new();
    for &i in &sample {
        let hits = nearest(&store, vector(i)).await;
        if hits.first() != Some(&format!("{i:032x}")) {
            missed.push((i, hits));
        }
    }
    assert!(missed.len() * 20 <= sample.len(), "{missed:?}");
}
