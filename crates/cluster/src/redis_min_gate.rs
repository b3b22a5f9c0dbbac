//! The MinHash page gate ([`trawl_dedup::MemoryMinGate`]'s rule, [`trawl_dedup::minhash`])
//! in Redis: one Lua script gathers the LSH candidates of the page's 20 bands, verifies each
//! with the b-bit sketch (stopping a comparison once it cannot reach the threshold), names
//! the most similar, and indexes the page, atomically, so two replicas that see near-copies
//! at the same moment keep exactly one. A redelivered page is matched only against the
//! pages indexed before it was: the same answer, and no second entry. Keys carry the
//! `{crawl}` hash tag: one cluster slot.
//!
//! Layout under `trawl:{crawl}:mh:`, built for bytes per page:
//! - `n`: the count of pages indexed; page `k` is the `k`-th;
//! - `s:{k >> 7}`: 128 sketches of [`SKETCH_BYTES`] each, one string (`SETRANGE`);
//! - `i:{k >> 7}` field `k & 127`: the page's id;
//! - `b:{band}:{key & 0x3fff}` field `key >> 14` (a 50-bit integer): the kept pages with
//!   that band key, 4 big-endian bytes each, at most [`MAX_BUCKET`]. 16,384 groups a band
//!   keep a group a compact listpack (<= 128 fields) up to about 2 million pages.

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;

use crate::redis_conn::Within;
use trawl_dedup::gate::{Gate, GateError, GateMethod, GatePage, GateVerdict, unless_self};
use trawl_dedup::minhash::{
    MARGIN, MAX_BUCKET, PERMS, SKETCH_BYTES, estimate, matches_needed, mismatch_table,
};

fn redis_err(e: redis::RedisError) -> GateError {
    GateError::Redis(e.to_string())
}

/// KEYS: the page count, then one band group per band. ARGV: id, sketch, matches needed,
/// key prefix, then the field of each band group. Returns {id, matches}: the page matched,
/// or {"", -1} when there is none.
const SCRIPT: &str = r#"
local id, sk, need, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local mism = {MISMATCH}
local len, perms = SKLEN, PERMS
local allowed = perms - need
local seen, cands, buckets = {}, {}, {}
for k = 2, #KEYS do
  local v = redis.call('HGET', KEYS[k], ARGV[3 + k])
  buckets[k] = v or ''
  if v then
    for off = 1, #v, 4 do
      local a, b, c, d = string.byte(v, off, off + 3)
      local n = ((a * 256 + b) * 256 + c) * 256 + d
      if not seen[n] then seen[n] = true; cands[#cands + 1] = n end
    end
  end
end
table.sort(cands)
-- Verified candidates in index order, and this page's own entry if it is a redelivery.
-- (The sketch's bytes are unpacked only when there is a candidate: most pages have none.)
local passed, self = {}, nil
local own = #cands > 0 and {string.byte(sk, 1, len)} or nil
for _, n in ipairs(cands) do
  local group = math.floor(n / 128)
  local at = (n % 128) * len
  local other = redis.call('GETRANGE', prefix .. 's:' .. group, at, at + len - 1)
  if #other == len then
    local bad, i = 0, 1
    while i <= len and bad <= allowed do
      local stop = math.min(i + 31, len)
      local o = {string.byte(other, i, stop)}
      for j = 1, #o do
        bad = bad + mism[bit.bxor(own[i + j - 1], o[j]) + 1]
      end
      i = stop + 1
    end
    if bad <= allowed then
      local oid = redis.call('HGET', prefix .. 'i:' .. group, n % 128)
      if oid == id and not self then self = n end
      if oid then passed[#passed + 1] = {n, perms - bad, oid} end
    end
  end
end
-- The most similar earlier page; the oldest among equals.
local best
for _, p in ipairs(passed) do
  if (not self or p[1] < self) and (not best or p[2] > best[2]) then best = p end
end
-- A redelivery, a sketch equal to a stored one, or a page no bucket has room for (none
-- would reach it) is not stored.
local room = false
for k = 2, #KEYS do
  if #buckets[k] < MAXBUCKET * 4 then room = true end
end
if self or not room or (best and best[2] == perms) then
  if best then return {best[3], best[2]} end
  return {'', -1}
end
local n = redis.call('INCR', KEYS[1]) - 1
local group = math.floor(n / 128)
redis.call('SETRANGE', prefix .. 's:' .. group, (n % 128) * len, sk)
redis.call('HSET', prefix .. 'i:' .. group, n % 128, id)
local packed = string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
  math.floor(n / 256) % 256, n % 256)
-- The buckets as read above: the script runs alone, nothing changed them since. A full
-- bucket takes no more pages (they are reached through their other bands).
for k = 2, #KEYS do
  if #buckets[k] < MAXBUCKET * 4 then
    redis.call('HSET', KEYS[k], ARGV[3 + k], buckets[k] .. packed)
  end
end
if best then return {best[3], best[2]} end
return {'', -1}
"#;

/// The script with its constants and mismatch table written in: scripts keep no state
/// between calls.
fn script_source() -> String {
    let table: Vec<String> = mismatch_table().iter().map(u8::to_string).collect();
    SCRIPT
        .replace("MISMATCH", &table.join(","))
        .replace("SKLEN", &SKETCH_BYTES.to_string())
        .replace("PERMS", &PERMS.to_string())
        .replace("MAXBUCKET", &MAX_BUCKET.to_string())
}

/// Band groups a band: the low 14 bits of its key.
const GROUP_BITS: u32 = 14;

pub struct RedisMinGate {
    conn: ConnectionManager,
    prefix: String,
    need: u32,
    script: Script,
}

impl RedisMinGate {
    /// Connects to `url` for crawl `crawl`; near-copies reach `similarity` (word 5-gram
    /// Jaccard: the estimate must reach it plus [`MARGIN`]).
    pub async fn connect(url: &str, crawl: &str, similarity: f64) -> Result<Self, GateError> {
        let conn = crate::redis_conn::connect(url).await.map_err(redis_err)?;
        Ok(Self {
            conn,
            prefix: format!("trawl:{{{crawl}}}:mh:"),
            need: matches_needed((similarity + MARGIN).min(1.0)),
            script: Script::new(&script_source()),
        })
    }

    /// Deletes every key of this crawl's gate (tests, benchmarks, finished crawls).
    pub async fn clear(&self) -> Result<(), GateError> {
        let mut conn = self.conn.clone();
        crate::redis_conn::unlink_prefixed(&mut conn, &self.prefix)
            .await
            .map(|_| ())
            .map_err(redis_err)
    }
}

#[async_trait]
impl Gate for RedisMinGate {
    fn method(&self) -> GateMethod {
        GateMethod::MinHash
    }

    async fn check_and_insert(&self, page: &GatePage, id: &str) -> Result<GateVerdict, GateError> {
        let sk = page.minhash.as_ref().ok_or(GateError::NoSketch)?;
        let mut inv = self.script.prepare_invoke();
        inv.key(format!("{}n", self.prefix));
        for (band, key) in sk.bands.iter().enumerate() {
            let group = key & ((1 << GROUP_BITS) - 1);
            inv.key(format!("{}b:{band}:{group}", self.prefix));
        }
        inv.arg(id)
            .arg(sk.bits.as_slice())
            .arg(self.need)
            .arg(&self.prefix);
        for key in &sk.bands {
            // 50 bits: a Lua number (a double) holds it exactly, and a listpack stores it
            // as an integer.
            inv.arg(key >> GROUP_BITS);
        }
        let mut conn = self.conn.clone();
        let (of, matches): (String, i64) = inv
            .invoke_async(&mut conn)
            .within()
            .await
            .map_err(redis_err)?;
        match matches {
            -1 => Ok(GateVerdict::Kept),
            m if (0..=PERMS as i64).contains(&m) => Ok(unless_self(
                GateVerdict::Similar {
                    of,
                    similarity: estimate(m as u32) as f32,
                },
                id,
            )),
            m => Err(GateError::Reply(format!("unexpected match count {m}"))),
        }
    }
}
