//! The SimHash gate ([`trawl_dedup::MemoryGate`]'s rule, candidate for candidate) in Redis:
//! one Lua script does the exact lookup, the band probes with exact distance checks, and the
//! insert, atomically. Copies are stored too (a print already stored adds nothing), and a
//! page shown again is known by its id and matched only against pages stored before it,
//! by the sequence number each entry carries. All keys of a crawl carry the `{crawl}`
//! hash tag so the script's keys live in one cluster slot.
//!
//! Layout under `trawl:{crawl}:sh:`, built for bytes per fingerprint. Buckets are packed
//! strings of fixed-size records, and small buckets are grouped as fields of one hash each,
//! which Redis stores as a compact listpack while it holds <= 128 fields of <= 64 bytes:
//! - `b{count}.{band}:{value >> 7}` field `value & 127`: the 8-byte fingerprints whose band
//!   `band` (of `count`, see [`Banding`]) equals `value`; one record per band per print;
//! - `x:{first two digest bytes}`: a string of 24-byte records (16-byte exact digest and the
//!   8-byte fingerprint);
//! - `ids:{top 17 bits of the fingerprint}` field fingerprint: a zero byte, the page's
//!   4-byte sequence number and its id (an entry written before sequence numbers is the id
//!   alone, and counts as older than every other);
//! - `n`: the count of pages stored, for the sequence numbers;
//! - `o:{top 14 bits of the id's xxh3}` field the id's xxh3 (8 bytes): the page's sequence
//!   number, so a page shown again is known by its id whatever its text became.

use async_trait::async_trait;

use crate::redis_conn::Conn;
use redis::Script;

use trawl_dedup::gate::{Gate, GateError, GatePage, GateVerdict, MAX_PRINTS_PER_BUCKET, id_hash};
use trawl_dedup::simhash::{Banding, Fingerprint};

pub(crate) fn redis_err(e: redis::RedisError) -> GateError {
    GateError::Redis(e.to_string())
}

/// Deletes every key of a crawl's gate under `prefix` (both gates' `clear`).
pub(crate) async fn clear_prefix(conn: &Conn, prefix: &str) -> Result<(), GateError> {
    let mut conn = conn.clone();
    crate::redis_conn::unlink_prefixed(&mut conn, prefix)
        .await
        .map(|_| ())
        .map_err(redis_err)
}

/// KEYS: exact bucket, ids group of this print, the page count, the id group of this
/// page, then one band group per band. ARGV: fingerprint (8 bytes), exact digest (16
/// bytes), id, max distance, ids key prefix, the id's hash (8 bytes), then the field of
/// each band group. Returns {id, distance}, or {"", -1} when kept.
const SCRIPT: &str = r#"
local fp, ex, id, maxd, idprefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
-- The ids group of any print: its top 17 bits, as the Rust side computes it.
local function ids_key(p)
  local b1, b2, b3 = string.byte(p, 1, 3)
  return idprefix .. (b1 * 512 + b2 * 2 + math.floor(b3 / 128))
end
-- The id and sequence number stored for a print.
local function entry(p)
  local v = redis.call('HGET', ids_key(p), p)
  if not v then return '', -1 end
  if string.byte(v, 1) ~= 0 then return v, -1 end
  local a, b, c, d = string.byte(v, 2, 5)
  return string.sub(v, 6), ((a * 256 + b) * 256 + c) * 256 + d
end
-- A page shown again is known by its id: matched only against pages stored before it.
local own = redis.call('HGET', KEYS[4], ARGV[6])
if own then own = tonumber(own) end
local xb = redis.call('GET', KEYS[1])
if xb then
  local from = 1
  while true do
    local at = string.find(xb, ex, from, true)
    if not at then break end
    if (at - 1) % 24 == 0 then
      local oid, seq = entry(string.sub(xb, at + 16, at + 23))
      if oid ~= id and (not own or seq < own) then return {oid, 0} end
      break
    end
    from = at + 1
  end
end
local pop = {POPCOUNTS}
local f = {string.byte(fp, 1, 8)}
-- Stored prints within the distance, band by band, oldest first in each.
local cands, seen, same, buckets = {}, {}, false, {}
for k = 5, #KEYS do
  local b = redis.call('HGET', KEYS[k], ARGV[2 + k])
  buckets[k] = b or ''
  if b then
    for off = 1, #b, 8 do
      -- Most records are far: give up on one as soon as it passes the limit.
      local d, j = 0, 0
      while j < 8 and d <= maxd do
        d = d + pop[bit.bxor(string.byte(b, off + j), f[j + 1]) + 1]
        j = j + 1
      end
      if d <= maxd then
        local p = string.sub(b, off, off + 7)
        if not seen[p] then
          seen[p] = true
          local oid, seq = entry(p)
          cands[#cands + 1] = {oid, d, seq}
          if d == 0 then same = true end
        end
      end
    end
  end
end
local best
for _, c in ipairs(cands) do
  if c[1] ~= id and (not own or c[3] < own) and (not best or c[2] < best[2]) then best = c end
end
-- Not stored: a redelivery, or a print already stored. A full bucket takes no more
-- prints; the page stays known by its id and its exact digest.
if not own and not same then
  local n = redis.call('INCR', KEYS[3])
  local seq = string.char(0, math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
  redis.call('APPEND', KEYS[1], ex .. fp)
  redis.call('HSET', KEYS[2], fp, seq .. id)
  redis.call('HSET', KEYS[4], ARGV[6], n)
  -- The buckets as read above (the script runs alone).
  for k = 5, #KEYS do
    if #buckets[k] < MAXPRINTS * 8 then
      redis.call('HSET', KEYS[k], ARGV[2 + k], buckets[k] .. fp)
    end
  end
end
if best then return {best[1], best[2]} end
return {'', -1}
"#;

/// The script with its popcount table written out as a literal: Redis scripts cannot keep
/// state between calls, and building the table with loops cost more than the lookup itself.
fn script_source() -> String {
    let table: Vec<String> = (0u32..256).map(|i| i.count_ones().to_string()).collect();
    SCRIPT
        .replace("POPCOUNTS", &table.join(","))
        .replace("MAXPRINTS", &MAX_PRINTS_PER_BUCKET.to_string())
}

pub struct RedisGate {
    conn: Conn,
    prefix: String,
    max_distance: u32,
    banding: Banding,
    script: Script,
}

impl RedisGate {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379`) for crawl `crawl`.
    pub async fn connect(url: &str, crawl: &str, max_distance: u32) -> Result<Self, GateError> {
        let conn = crate::redis_conn::connect_patient(url)
            .await
            .map_err(redis_err)?;
        Ok(Self {
            conn,
            prefix: format!("trawl:{{{crawl}}}:sh:"),
            max_distance: max_distance.min(3),
            banding: Banding::for_distance(max_distance),
            script: Script::new(&script_source()),
        })
    }

    /// Deletes every key of this crawl's gate (tests, benchmarks, finished crawls).
    pub async fn clear(&self) -> Result<(), GateError> {
        clear_prefix(&self.conn, &self.prefix).await
    }
}

#[async_trait]
impl Gate for RedisGate {
    async fn check_and_insert(&self, page: &GatePage, id: &str) -> Result<GateVerdict, GateError> {
        let fp: Fingerprint = page.fp;
        let b = self.banding.bands(fp.simhash);
        let digest = fp.exact.to_be_bytes();
        let mut inv = self.script.prepare_invoke();
        inv.key(format!(
            "{}x:{:02x}{:02x}",
            self.prefix, digest[0], digest[1]
        ))
        .key(format!("{}ids:{}", self.prefix, fp.simhash >> 47))
        .key(format!("{}n", self.prefix))
        .key(format!("{}o:{}", self.prefix, id_hash(id) >> 50));
        for (i, v) in &b {
            inv.key(format!(
                "{}b{}.{i}:{}",
                self.prefix,
                self.banding.count,
                v >> 7
            ));
        }
        inv.arg(fp.simhash.to_be_bytes().to_vec())
            .arg(digest.to_vec())
            .arg(id)
            .arg(self.max_distance)
            .arg(format!("{}ids:", self.prefix))
            .arg(id_hash(id).to_be_bytes().to_vec());
        for (_, v) in &b {
            inv.arg(v & 127);
        }
        let mut conn = self.conn.clone();
        let (of, distance): (String, i64) = inv.invoke_async(&mut conn).await.map_err(redis_err)?;
        match distance {
            -1 => Ok(GateVerdict::Kept),
            d if d >= 0 => Ok(GateVerdict::Duplicate {
                of,
                distance: d as u32,
            }),
            d => Err(GateError::Reply(format!("unexpected distance {d}"))),
        }
    }
}
