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
//! - `o:{top 14 bits of the id's xxh3}` field the id's xxh3 (8 bytes): `k`, so a page shown
//!   again is known by its id (two ids with one 64-bit hash would be taken for one page);
//! - `b:{band}:{key & 0x3fff}` field `key >> 14` (a 50-bit integer): the stored pages with
//!   that band key, 4 big-endian bytes each, at most [`MAX_BUCKET`]. 16,384 groups a band
//!   keep a group a compact listpack (<= 128 fields of <= 64 bytes) up to about 2 million
//!   pages; a bucket past 16 pages turns its group into a hash table.

use crate::redis_conn::Conn;
use async_trait::async_trait;
use redis::Script;

use crate::redis_gate::{clear_prefix, redis_err};
use trawl_dedup::gate::{Gate, GateError, GateMethod, GatePage, GateVerdict, id_hash};
use trawl_dedup::minhash::{
    MARGIN, MAX_BUCKET, PERMS, SKETCH_BYTES, estimate, matches_needed, mismatch_table,
};

/// KEYS: the page count, the id group of this page, then one band group per band. ARGV:
/// id, sketch, matches needed, key prefix, the id's hash (8 bytes), then the field of each
/// band group. Returns {id, matches}: the page matched, or {"", -1} when there is none.
const SCRIPT: &str = r#"
local id, sk, need, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local mism = {MISMATCH}
local len, perms = SKLEN, PERMS
local allowed = perms - need
-- A page shown again is known by its id: matched only against pages stored before it.
local own = redis.call('HGET', KEYS[2], ARGV[5])
if own then own = tonumber(own) end
local seen, cands, buckets = {}, {}, {}
for k = 3, #KEYS do
  local v = redis.call('HGET', KEYS[k], ARGV[3 + k])
  buckets[k] = v or ''
  if v then
    for off = 1, #v, 4 do
      local a, b, c, d = string.byte(v, off, off + 3)
      local n = ((a * 256 + b) * 256 + c) * 256 + d
      if not seen[n] and (not own or n < own) then seen[n] = true; cands[#cands + 1] = n end
    end
  end
end
table.sort(cands)
-- The most similar verified candidate; the oldest among equals. (The sketch's bytes are
-- unpacked only when there is a candidate: most pages have none.)
local best, bestm = nil, -1
local mine = #cands > 0 and {string.byte(sk, 1, len)} or nil
for _, n in ipairs(cands) do
  local at = (n % 128) * len
  local other = redis.call('GETRANGE', prefix .. 's:' .. math.floor(n / 128), at, at + len - 1)
  if #other == len then
    local bad, i = 0, 1
    while i <= len and bad <= allowed do
      local stop = math.min(i + 31, len)
      local o = {string.byte(other, i, stop)}
      for j = 1, #o do
        bad = bad + mism[bit.bxor(mine[i + j - 1], o[j]) + 1]
      end
      i = stop + 1
    end
    if bad <= allowed and perms - bad > bestm then best, bestm = n, perms - bad end
  end
end
local named = best and (redis.call('HGET', prefix .. 'i:' .. math.floor(best / 128), best % 128) or '')
-- A redelivery, or a sketch equal to a stored one, is not stored.
if not own and bestm < perms then
  local n = redis.call('INCR', KEYS[1]) - 1
  local group = math.floor(n / 128)
  redis.call('SETRANGE', prefix .. 's:' .. group, (n % 128) * len, sk)
  redis.call('HSET', prefix .. 'i:' .. group, n % 128, id)
  redis.call('HSET', KEYS[2], ARGV[5], n)
  local packed = string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
  -- The buckets as read above (the script runs alone). A full bucket takes no more pages:
  -- they are reached through their other bands, and known by their ids.
  for k = 3, #KEYS do
    if #buckets[k] < MAXBUCKET * 4 then
      redis.call('HSET', KEYS[k], ARGV[3 + k], buckets[k] .. packed)
    end
  end
end
if best then return {named, bestm} end
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
    conn: Conn,
    prefix: String,
    need: u32,
    script: Script,
}

impl RedisMinGate {
    /// Connects to `url` for crawl `crawl`; near-copies reach `similarity` (word 5-gram
    /// Jaccard: the estimate must reach it plus [`MARGIN`]).
    pub async fn connect(url: &str, crawl: &str, similarity: f64) -> Result<Self, GateError> {
        let conn = crate::redis_conn::connect_patient(url)
            .await
            .map_err(redis_err)?;
        Ok(Self {
            conn,
            prefix: format!("trawl:{{{crawl}}}:mh:"),
            need: matches_needed((similarity + MARGIN).min(1.0)),
            script: Script::new(&script_source()),
        })
    }

    /// Deletes every key of this crawl's gate (tests, benchmarks, finished crawls).
    pub async fn clear(&self) -> Result<(), GateError> {
        clear_prefix(&self.conn, &self.prefix).await
    }
}

#[async_trait]
impl Gate for RedisMinGate {
    fn method(&self) -> GateMethod {
        GateMethod::MinHash
    }

    async fn check_and_insert(&self, page: &GatePage, id: &str) -> Result<GateVerdict, GateError> {
        let sk = page.minhash.as_ref().ok_or(GateError::NoSketch)?;
        let id_hash = id_hash(id);
        let mut inv = self.script.prepare_invoke();
        inv.key(format!("{}n", self.prefix))
            .key(format!("{}o:{}", self.prefix, id_hash >> 50));
        for (band, key) in sk.bands.iter().enumerate() {
            let group = key & ((1 << GROUP_BITS) - 1);
            inv.key(format!("{}b:{band}:{group}", self.prefix));
        }
        inv.arg(id)
            .arg(sk.bits.as_slice())
            .arg(self.need)
            .arg(&self.prefix)
            .arg(id_hash.to_be_bytes().to_vec());
        for key in &sk.bands {
            // 50 bits, sent as decimal digits: a listpack stores such a field as an integer.
            inv.arg(key >> GROUP_BITS);
        }
        let mut conn = self.conn.clone();
        let (of, matches): (String, i64) = inv.invoke_async(&mut conn).await.map_err(redis_err)?;
        match matches {
            -1 => Ok(GateVerdict::Kept),
            m if (0..=PERMS as i64).contains(&m) => Ok(GateVerdict::Similar {
                of,
                similarity: estimate(m as u32) as f32,
            }),
            m => Err(GateError::Reply(format!("unexpected match count {m}"))),
        }
    }
}
