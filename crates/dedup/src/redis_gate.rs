//! The gate in Redis: one Lua script does the exact lookup, the 4 band probes with exact
//! distance checks, and the insert, atomically. All keys of a crawl carry the `{crawl}` hash
//! tag so the script's keys live in one cluster slot.
//!
//! Keys under `trawl:{crawl}:sh:`: `exact` (hash: exact digest -> id), `ids` (hash:
//! fingerprint -> id), and `b{band}:{value}` (set of 8-byte fingerprints).

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionManager;

use crate::gate::{Gate, GateError, Verdict};
use crate::simhash::{Fingerprint, bands};

const SCRIPT: &str = r#"
local exact = redis.call('HGET', KEYS[1], ARGV[2])
if exact then return {exact, 0} end
local pop = {}
for i = 0, 255 do
  local c, v = 0, i
  while v > 0 do c = c + (v % 2); v = math.floor(v / 2) end
  pop[i] = c
end
local fp = ARGV[1]
local maxd = tonumber(ARGV[4])
local best, bestd = nil, 65
for k = 3, 6 do
  local members = redis.call('SMEMBERS', KEYS[k])
  for _, m in ipairs(members) do
    local d = 0
    for j = 1, 8 do
      d = d + pop[bit.bxor(string.byte(m, j), string.byte(fp, j))]
    end
    if d < bestd then bestd = d; best = m end
  end
end
if best and bestd <= maxd then
  return {redis.call('HGET', KEYS[2], best), bestd}
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[2], fp, ARGV[3])
for k = 3, 6 do redis.call('SADD', KEYS[k], fp) end
return {'', -1}
"#;

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
            script: Script::new(SCRIPT),
        })
    }

    /// Every key of this crawl's gate (for cleanup in tests and `trawl` tooling).
    pub async fn clear(&self) -> Result<(), GateError> {
        let mut conn = self.conn.clone();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!(
                "{}*",
                self.prefix.replace('{', "\\{").replace('}', "\\}")
            ))
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(keys)
                .query_async::<()>(&mut conn)
                .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Gate for RedisGate {
    async fn check_and_insert(&self, fp: Fingerprint, id: &str) -> Result<Verdict, GateError> {
        let b = bands(fp.simhash);
        let mut inv = self.script.prepare_invoke();
        inv.key(format!("{}exact", self.prefix))
            .key(format!("{}ids", self.prefix));
        for (i, v) in b.iter().enumerate() {
            inv.key(format!("{}b{i}:{v}", self.prefix));
        }
        inv.arg(fp.simhash.to_be_bytes().to_vec())
            .arg(fp.exact.to_be_bytes().to_vec())
            .arg(id)
            .arg(self.max_distance);
        let mut conn = self.conn.clone();
        let (of, distance): (String, i64) = inv.invoke_async(&mut conn).await?;
        match distance {
            -1 => Ok(Verdict::Kept),
            d if d >= 0 => Ok(Verdict::Duplicate {
                of,
                distance: d as u32,
            }),
            d => Err(GateError::Reply(format!("unexpected distance {d}"))),
        }
    }
}
