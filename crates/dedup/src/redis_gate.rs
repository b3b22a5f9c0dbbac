//! The gate in Redis: one Lua script does the exact lookup, the 4 band probes with exact
//! distance checks, and the insert, atomically. All keys of a crawl carry the `{crawl}` hash
//! tag so the script's keys live in one cluster slot.
//!
//! Layout under `trawl:{crawl}:sh:`, built for bytes per fingerprint: each bucket is one
//! Redis string of packed fixed-size records, appended to, so an entry costs its bytes and
//! no per-entry structure:
//! - `b{band}:{value}`: 8-byte fingerprints whose band `band` equals `value` (4 per print);
//! - `x:{prefix}`: 24-byte records (16-byte exact digest + 8-byte fingerprint), bucketed by
//!   the digest's first two bytes;
//! - `ids`: a hash from the 8-byte fingerprint to the page id, read only on a match.

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;

use crate::gate::{Gate, GateError, Verdict, unless_self};
use crate::simhash::{Fingerprint, bands};

/// KEYS: exact bucket, ids, band 0..3 buckets. ARGV: fingerprint (8 bytes), exact digest
/// (16 bytes), id, max distance. Returns {id, distance} or {"", -1} when kept.
const SCRIPT: &str = r#"
local fp, ex, id, maxd = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local xb = redis.call('GET', KEYS[1])
if xb then
  local from = 1
  while true do
    local at = string.find(xb, ex, from, true)
    if not at then break end
    if (at - 1) % 24 == 0 then
      return {redis.call('HGET', KEYS[2], string.sub(xb, at + 16, at + 23)) or '', 0}
    end
    from = at + 1
  end
end
local pop = {POPCOUNTS}
local f = {string.byte(fp, 1, 8)}
local best, bestd = nil, 65
for k = 3, 6 do
  local b = redis.call('GET', KEYS[k])
  if b then
    for off = 1, #b, 8 do
      -- Most records are far: give up on one as soon as it passes the limit.
      local d, j = 0, 0
      while j < 8 and d <= maxd do
        d = d + pop[bit.bxor(string.byte(b, off + j), f[j + 1]) + 1]
        j = j + 1
      end
      if d <= maxd and d < bestd then bestd = d; best = string.sub(b, off, off + 7) end
    end
  end
end
if best and bestd <= maxd then
  return {redis.call('HGET', KEYS[2], best) or '', bestd}
end
redis.call('APPEND', KEYS[1], ex .. fp)
redis.call('HSET', KEYS[2], fp, id)
for k = 3, 6 do redis.call('APPEND', KEYS[k], fp) end
return {'', -1}
"#;

/// The script with its popcount table written out as a literal: Redis scripts cannot keep
/// state between calls, and building the table with loops cost more than the lookup itself.
fn script_source() -> String {
    let table: Vec<String> = (0u32..256).map(|i| i.count_ones().to_string()).collect();
    SCRIPT.replace("POPCOUNTS", &table.join(","))
}

pub struct RedisGate {
    conn: ConnectionManager,
    prefix: String,
    max_distance: u32,
    script: Script,
}

impl RedisGate {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379`) for crawl `crawl`.
    pub async fn connect(url: &str, crawl: &str, max_distance: u32) -> Result<Self, GateError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        Ok(Self {
            conn,
            prefix: format!("trawl:{{{crawl}}}:sh:"),
            max_distance,
            script: Script::new(&script_source()),
        })
    }

    /// Deletes every key of this crawl's gate (tests, benchmarks, finished crawls).
    pub async fn clear(&self) -> Result<(), GateError> {
        let mut conn = self.conn.clone();
        let pattern = format!("{}*", self.prefix.replace('{', "\\{").replace('}', "\\}"));
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(10_000)
                .query_async(&mut conn)
                .await?;
            if !keys.is_empty() {
                redis::cmd("UNLINK")
                    .arg(keys)
                    .query_async::<()>(&mut conn)
                    .await?;
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }
}

#[async_trait]
impl Gate for RedisGate {
    async fn check_and_insert(&self, fp: Fingerprint, id: &str) -> Result<Verdict, GateError> {
        let b = bands(fp.simhash);
        let mut inv = self.script.prepare_invoke();
        let digest = fp.exact.to_be_bytes();
        inv.key(format!(
            "{}x:{:02x}{:02x}",
            self.prefix, digest[0], digest[1]
        ))
        .key(format!("{}ids", self.prefix));
        for (i, v) in b.iter().enumerate() {
            inv.key(format!("{}b{i}:{v}", self.prefix));
        }
        inv.arg(fp.simhash.to_be_bytes().to_vec())
            .arg(digest.to_vec())
            .arg(id)
            .arg(self.max_distance);
        let mut conn = self.conn.clone();
        let (of, distance): (String, i64) = inv.invoke_async(&mut conn).await?;
        match distance {
            -1 => Ok(Verdict::Kept),
            d if d >= 0 => Ok(unless_self(
                Verdict::Duplicate {
                    of,
                    distance: d as u32,
                },
                id,
            )),
            d => Err(GateError::Reply(format!("unexpected distance {d}"))),
        }
    }
}
