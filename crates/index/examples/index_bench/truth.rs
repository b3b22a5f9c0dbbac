//! Exact search as the rows are generated.
//!
//! At ten million rows a flat search through LanceDB reads the whole vector column (15 GB)
//! for each query: 200 queries would take most of an hour. The rows are made here, so
//! each query's exact top k is kept while they are made, one pass over each batch for
//! all queries, split over the cores. Every vector is unit length, so the dot product
//! orders rows as LanceDB's cosine distance does.

/// Rows kept per query.
pub const K: usize = 10;

pub struct Truth {
    queries: Vec<Vec<f32>>,
    /// Per query, its best rows so far as (similarity, row), best first.
    top: Vec<Vec<(f32, usize)>>,
}

impl Truth {
    pub fn new(queries: Vec<Vec<f32>>) -> Self {
        let top = vec![Vec::with_capacity(K + 1); queries.len()];
        Truth { queries, top }
    }

    /// Rows `from..from + vectors.len()`.
    pub fn add(&mut self, from: usize, vectors: &[Vec<f32>]) {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per = self.queries.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            for (qs, tops) in self.queries.chunks(per).zip(self.top.chunks_mut(per)) {
                s.spawn(move || {
                    for (q, top) in qs.iter().zip(tops) {
                        for (j, v) in vectors.iter().enumerate() {
                            offer(top, dot8(q, v), from + j);
                        }
                    }
                });
            }
        });
    }

    /// Each query's top rows, as the table's ids.
    pub fn ids(&self, id: impl Fn(usize) -> String) -> Vec<Vec<String>> {
        self.top
            .iter()
            .map(|t| t.iter().map(|&(_, row)| id(row)).collect())
            .collect()
    }
}

fn offer(top: &mut Vec<(f32, usize)>, score: f32, row: usize) {
    if top.len() == K && top[K - 1].0 >= score {
        return;
    }
    let at = top.partition_point(|&(s, _)| s >= score);
    top.insert(at, (score, row));
    top.truncate(K);
}

/// A dot product in eight lanes, so the compiler can keep it in vector registers (a
/// single running sum must be added in order, which it cannot vectorise).
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_rows_in_order() {
        let qs = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        let mut t = Truth::new(qs);
        let rows: Vec<Vec<f32>> = (0..30)
            .map(|i| {
                let a = i as f32 / 30.0 * std::f32::consts::FRAC_PI_2;
                vec![a.cos(), a.sin()]
            })
            .collect();
        t.add(0, &rows[..17]);
        t.add(17, &rows[17..]);
        let ids = t.ids(|r| r.to_string());
        assert_eq!(ids[0], (0..10).map(|r| r.to_string()).collect::<Vec<_>>());
        assert_eq!(
            ids[1],
            (20..30).rev().map(|r| r.to_string()).collect::<Vec<_>>()
        );
    }
}
