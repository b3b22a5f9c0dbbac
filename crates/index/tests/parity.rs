//! trawl's embeddings against sentence-transformers' reference vectors
//! (`shared/data/embeddings/reference.json`): cosine >= 0.9999 for every text, including
//! one past the 256-word-piece window, with both f32 forward passes (trawl's own and
//! candle's, which CUDA devices use), and >= 0.99 with int8 dense layers (the CPU default
//! where the CPU has AVX-512 VNNI).

use crate::common;

use trawl_index::{Embedder, Engine};

#[test]
fn embeddings_match_sentence_transformers() {
    let (Some(dir), Some(reference)) = (
        common::model_dir(),
        common::shared("data/embeddings/reference.json"),
    ) else {
        return;
    };
    let data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference).unwrap()).unwrap();
    let items = data["items"].as_array().unwrap();
    assert!(items.len() >= 16);
    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    for engine in [Engine::Native, Engine::Int8, Engine::Candle] {
        let e = Embedder::load_engine(&dir, engine).unwrap();
        assert_eq!(e.dim(), 384);
        check(&e, &texts, items, engine);
    }
    // The CPU default is the native pass, int8 where the CPU runs it natively; the
    // setting picks either, and refuses the GPU's format.
    let want = if trawl_index::embed::int8_is_native() {
        "cpu int8"
    } else {
        "cpu"
    };
    assert_eq!(Embedder::load(&dir).unwrap().device_name(), want);
    let load = |p: &str| Embedder::load_with(&dir, p.parse().unwrap());
    assert_eq!(load("f32").unwrap().device_name(), "cpu");
    assert_eq!(load("int8").unwrap().device_name(), "cpu int8");
    assert!(load("tf32").is_err());
    assert!("f16".parse::<trawl_index::Precision>().is_err());
}

fn check(e: &Embedder, texts: &[&str], items: &[serde_json::Value], engine: Engine) {
    let floor = if engine == Engine::Int8 { 0.99 } else { 0.9999 };
    // Batched (batch 5 mixes long and short texts: padding for candle, packing for the
    // native pass) and one by one.
    for batch in [5, 1] {
        let got = e.embed(texts, batch).unwrap();
        for (item, v) in items.iter().zip(&got) {
            let want: Vec<f32> = item["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            let dot: f32 = v.iter().zip(&want).map(|(a, b)| a * b).sum();
            let na: f32 = v.iter().map(|a| a * a).sum::<f32>().sqrt();
            let nb: f32 = want.iter().map(|a| a * a).sum::<f32>().sqrt();
            let cos = dot / (na * nb);
            assert!((na - 1.0).abs() < 1e-4, "not normalized: {na}");
            assert!(
                cos >= floor,
                "{engine:?}, batch {batch}: cosine {cos} for {:?} ({} word pieces)",
                item["text"]
                    .as_str()
                    .unwrap()
                    .chars()
                    .take(60)
                    .collect::<String>(),
                item["tokens_untruncated"]
            );
        }
    }
}
