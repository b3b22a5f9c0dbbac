//! Queries: vector (cosine over the chunk vectors), text (BM25 over the full-text index),
//! and hybrid (the two rankings fused by reciprocal rank).

use std::collections::HashMap;
use std::str::FromStr;

use arrow_array::{Float32Array, RecordBatch, StringArray, UInt32Array};
use futures_util::TryStreamExt;
use lancedb::DistanceType;
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use serde::Serialize;

use crate::IndexError;
use crate::embed::Embedder;
use crate::store::{Store, col, collect, heading_paths, in_list};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Vector,
    Text,
    Hybrid,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vector" => Ok(Self::Vector),
            "text" => Ok(Self::Text),
            "hybrid" => Ok(Self::Hybrid),
            _ => Err(format!(
                "unknown search mode {s:?} (vector, text or hybrid)"
            )),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hit {
    /// Vector: cosine similarity; text: BM25; hybrid: reciprocal-rank fusion score.
    pub score: f32,
    pub id: String,
    pub title: String,
    pub url: String,
    pub canonical_url: String,
    pub heading_path: Vec<String>,
    pub position: u32,
    pub text: String,
    /// Other pages that hold the same passage (its aliases).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_at: Vec<String>,
}

/// The score columns of a vector and a full-text search. Named in the projection: left to
/// LanceDB, each search logs a deprecation warning (it adds them itself for now).
const DISTANCE: &str = "_distance";
const SCORE: &str = "_score";

/// The columns a hit is read from, and the search's score.
fn with_score(score: &str) -> Vec<&str> {
    COLUMNS.iter().copied().chain([score]).collect()
}

const COLUMNS: [&str; 7] = [
    "id",
    "title",
    "url",
    "canonical_url",
    "heading_path",
    "position",
    "text",
];

/// IVF partitions searched per query, and how many times k candidates are re-ranked with
/// exact distances, once a vector index exists (`bench/index/scale.sh`: recall@10 against
/// exact search and latency at a million chunks grown from real embeddings, for 20 to 100
/// partitions and 10 to 40 times k).
pub const NPROBES: usize = 50;
pub const REFINE_FACTOR: u32 = 20;

/// Reciprocal-rank fusion constant (the value from Cormack et al. that most engines use).
const RRF_K: f32 = 60.0;

fn st(e: lancedb::Error) -> IndexError {
    IndexError::Search(e.to_string())
}

pub async fn search(
    store: &Store,
    embedder: Option<&Embedder>,
    query: &str,
    k: usize,
    mode: Mode,
) -> Result<Vec<Hit>, IndexError> {
    search_with_preview(store, None, embedder, query, k, mode).await
}

/// [`search`], with the full-text half answered by `preview` when there is one: the text
/// index a crawl keeps while its vectors are being computed ([`crate::preview`]), which
/// covers every page written so far.
pub async fn search_with_preview(
    store: &Store,
    preview: Option<&Store>,
    embedder: Option<&Embedder>,
    query: &str,
    k: usize,
    mode: Mode,
) -> Result<Vec<Hit>, IndexError> {
    if query.trim().is_empty() {
        return Err(IndexError::Search("the query is empty".into()));
    }
    let k = k.max(1);
    let text_store = preview.unwrap_or(store);
    // Where a query's time goes, for `TRAWL_LOG=trawl_index=debug`.
    let by_vector = async |k| {
        let t = std::time::Instant::now();
        let mut v = vector(store, embedder, query, k).await?;
        let searched = t.elapsed();
        add_aliases(store, &mut v).await?;
        tracing::debug!(?searched, aliases = ?(t.elapsed() - searched), "vector search");
        Ok::<_, IndexError>(v)
    };
    let by_text = async |k| {
        let t = std::time::Instant::now();
        let mut h = text(text_store, query, k).await?;
        let searched = t.elapsed();
        add_aliases(text_store, &mut h).await?;
        tracing::debug!(?searched, aliases = ?(t.elapsed() - searched), "text search");
        Ok::<_, IndexError>(h)
    };
    Ok(match mode {
        Mode::Vector => by_vector(k).await?,
        Mode::Text => by_text(k).await?,
        // The halves side by side: one after the other, a hybrid query took the sum of
        // the two (184 ms p95 at 4.3 M chunks against 72 and 52, bench/index/README.md).
        Mode::Hybrid => {
            let (v, t) = futures_util::try_join!(by_vector(k * 3), by_text(k * 3))?;
            fuse(v, t, k)
        }
    })
}

async fn vector(
    store: &Store,
    embedder: Option<&Embedder>,
    query: &str,
    k: usize,
) -> Result<Vec<Hit>, IndexError> {
    if store.dim().is_none() {
        return Err(IndexError::Search(
            "this index was built with --no-embed: it has no vectors; use --mode text".into(),
        ));
    }
    let Some(e) = embedder else {
        return Err(IndexError::Search(
            "vector search needs the embedding model".into(),
        ));
    };
    let q = e.embed(&[query], 1)?.pop().unwrap_or_default();
    let batches = collect(
        &store
            .chunks()
            .vector_search(q)
            .map_err(st)?
            .distance_type(DistanceType::Cosine)
            .nprobes(NPROBES)
            .map_err(st)?
            .select(Select::columns(&with_score(DISTANCE)))
            .limit(k)
            .refine_factor(REFINE_FACTOR),
    )
    .await
    .map_err(st)?;
    hits(&batches, DISTANCE, |d| 1.0 - d)
}

async fn text(store: &Store, query: &str, k: usize) -> Result<Vec<Hit>, IndexError> {
    let batches: Vec<RecordBatch> = store
        .chunks()
        .query()
        .full_text_search(FullTextSearchQuery::new(query.to_string()))
        .select(Select::columns(&with_score(SCORE)))
        .limit(k)
        .execute()
        .await
        .map_err(|e| {
            let m = e.to_string();
            if m.to_lowercase().contains("index") {
                IndexError::Search(format!(
                    "{m} (the full-text index is built when a crawl or `trawl index` finishes)"
                ))
            } else {
                IndexError::Search(m)
            }
        })?
        .try_collect()
        .await
        .map_err(st)?;
    let mut out = hits(&batches, SCORE, |s| s)?;
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok(out)
}

fn hits(
    batches: &[RecordBatch],
    score_col: &str,
    score: impl Fn(f32) -> f32,
) -> Result<Vec<Hit>, IndexError> {
    let mut out = Vec::new();
    for b in batches {
        let id = col::<StringArray>(b, "id")?;
        let title = col::<StringArray>(b, "title")?;
        let url = col::<StringArray>(b, "url")?;
        let canon = col::<StringArray>(b, "canonical_url")?;
        let pos = col::<UInt32Array>(b, "position")?;
        let text = col::<StringArray>(b, "text")?;
        let s = col::<Float32Array>(b, score_col)?;
        for (i, heading_path) in heading_paths(b)?.into_iter().enumerate() {
            out.push(Hit {
                score: score(s.value(i)),
                id: id.value(i).to_string(),
                title: title.value(i).to_string(),
                url: url.value(i).to_string(),
                canonical_url: canon.value(i).to_string(),
                heading_path,
                position: pos.value(i),
                text: text.value(i).to_string(),
                also_at: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// Reciprocal-rank fusion: each list adds 1 / (60 + rank) to a chunk's score.
fn fuse(vector: Vec<Hit>, text: Vec<Hit>, k: usize) -> Vec<Hit> {
    let mut by_id: HashMap<String, Hit> = HashMap::new();
    for list in [vector, text] {
        for (rank, mut h) in list.into_iter().enumerate() {
            let add = 1.0 / (RRF_K + rank as f32 + 1.0);
            by_id
                .entry(h.id.clone())
                .and_modify(|e| e.score += add)
                .or_insert_with(|| {
                    h.score = add;
                    h
                });
        }
    }
    let mut out: Vec<Hit> = by_id.into_values().collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    out.truncate(k);
    out
}

async fn add_aliases(store: &Store, hits: &mut [Hit]) -> Result<(), IndexError> {
    if hits.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    let list = in_list(&ids);
    let batches = collect(
        &store
            .aliases()
            .query()
            .only_if(format!("alias_of IN ({list})"))
            .select(Select::columns(&["alias_of", "url"])),
    )
    .await
    .map_err(st)?;
    for b in &batches {
        let of = col::<StringArray>(b, "alias_of")?;
        let url = col::<StringArray>(b, "url")?;
        for i in 0..b.num_rows() {
            if let Some(h) = hits.iter_mut().find(|h| h.id == of.value(i)) {
                let u = url.value(i).to_string();
                if u != h.url && !h.also_at.contains(&u) {
                    h.also_at.push(u);
                }
            }
        }
    }
    for h in hits.iter_mut() {
        h.also_at.sort();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str) -> Hit {
        Hit {
            score: 0.0,
            id: id.into(),
            title: String::new(),
            url: String::new(),
            canonical_url: String::new(),
            heading_path: vec![],
            position: 0,
            text: String::new(),
            also_at: vec![],
        }
    }

    #[test]
    fn fusion_rewards_agreement() {
        let v = vec![hit("a"), hit("b"), hit("c")];
        let t = vec![hit("c"), hit("d"), hit("b")];
        let f = fuse(v, t, 3);
        let ids: Vec<_> = f.iter().map(|h| h.id.as_str()).collect();
        // c: 1/63 + 1/61; b: 1/62 + 1/63; a: 1/61.
        assert_eq!(ids, ["c", "b", "a"]);
    }
}
