"""The Lua scripts of the Redis frontier: one atomic script per per-host operation.

Every script touches the keys of ONE logical shard only; all of them share the shard's hash
tag (``{CRAWL:s}``), so they live in one cluster slot. The shard prefix ``sp`` is
``KEYS[1]`` minus its last part; scripts build the shard's other key names from it (same
slot, so Redis Cluster accepts them).

Keys of a shard (``sp`` = ``{CRAWL:s}:``):

* ``n``       hash: ``pending``, ``leased``, ``done`` counters
* ``seen:B``  string: URL-seen bucket B, 8-byte big-endian fingerprints appended (exact)
* ``bloom``   string: the shard's Bloom filter bits, instead (``--seen bloom:RATE``; the
              client sends a URL's bit positions, comma-separated, and ``b`` as its bucket)
* ``q:HOST``  sorted set: the host's pending entries; score = ((priority+512)*1024+depth)*2^33
              + seq (FIFO within a level); member = ``KEY16`` ``attempts`` ``|`` JSON
* ``ready``   sorted set: hosts that may be leased; score = not_before (exact), member =
              ``%04d`` head depth + host (ties: lower head depth, then host name)
* ``rm``      hash: host -> its current ``ready`` member
* ``nb``      hash: host -> not_before (seconds, server clock in production)
* ``inf``     hash: host -> requests leased now
* ``active``  set: hosts with pending or leased work
* ``leases``  sorted set: token -> expires_at; ``lease`` hash: token -> host, score, member
* ``lfp``     hash: KEY16 of a leased entry -> token
* ``rel``     hash: token -> 1 for a lease whose host slot is released (counted out of ``inf``)
* ``il:KEY16`` set: source hosts that linked to a pending URL (``--order inlinks``)
* ``forced``  hash: KEY16 of a ``force=True`` entry -> 1 (pending or leased) or d (done)
* ``seq``     counter of entries; ``tok`` the last token issued (microseconds, see below)
* ``settled`` sorted set: the last 4096 tokens acked or retried (an ack or retry sent again
              after its reply was lost -- Redis restarted -- answers "already done")
* ``acks``    hash: worker id -> 2xx acks that spent a page of its ``--max-pages``
              reservation (the budget's outbox: counted in the ack's script, applied to
              ``{CRAWL}:resv`` by :func:`skitter.redis_shares.spend_pages`, idempotently)
* ``rate``    hash: 5-second bucket (server ``TIME`` // 5) -> URLs acked in it; buckets
              older than a minute are dropped when a new one starts (``skitter status``
              pages/s over the last minute)

Clock: ARGV[2] is ``c`` (times are the caller's: the contract suite's fake clock) or ``s``
(the server's: ``skew = TIME - ARGV[3]``, the caller's clock reading when it sent the call,
is added to every time received and subtracted from every time returned).

Fencing tokens: ``max(TIME in microseconds, last + 1)`` per shard; the client makes the
public token ``us * 1024 + shard``. A Redis restarted from an AOF that lost its last second
cannot hand out a token twice: the tokens it lost were at most the crash instant's
microseconds, and after the restart ``TIME`` is later.
"""

from __future__ import annotations

__all__ = [
    "ACK",
    "ADD",
    "BLOOM_PRESIZE",
    "DELAY",
    "LEASE",
    "MARK_DONE",
    "NOTE_INLINKS",
    "RATE_BUCKETS",
    "RATE_BUCKET_S",
    "RECLAIM",
    "RELEASE",
    "RENEW",
    "RETRY",
    "SEQ",
]

#: Entries per (priority, depth) level of a shard: the seq part of a queue score.
SEQ = 2**33

#: Seconds per bucket of a shard's ``rate`` hash, and buckets kept (one minute).
RATE_BUCKET_S = 5
RATE_BUCKETS = 12

_LIB = (
    f"local RATE_BUCKET = {RATE_BUCKET_S}\nlocal RATE_BUCKETS = {RATE_BUCKETS}\n"
    + r"""
local sp = string.sub(KEYS[1], 1, #KEYS[1] - 1)
local SEQ = 8589934592
local skew = 0
if ARGV[2] == 's' then
  local t = redis.call('TIME')
  skew = tonumber(t[1]) + tonumber(t[2]) / 1000000 - tonumber(ARGV[3])
end
local conc = tonumber(ARGV[4])
local function fmt(x) return string.format('%.17g', x) end

local function has(s, f)
  local i = 1
  while true do
    local j = string.find(s, f, i, true)
    if not j then return false end
    if (j - 1) % 8 == 0 then return true end
    i = j + 1
  end
end

-- URL-seen test and insert of one URL: true when new. fp: its 8 bytes (exact) or its Bloom
-- bit positions (b == 'b'); b: its bucket; cache: bucket strings read by this call
local function seen_add(fp, b, cache)
  if b == 'b' then
    local new = false
    for p in string.gmatch(fp, '%d+') do
      if redis.call('SETBIT', sp .. 'bloom', p, 1) == 0 then new = true end
    end
    return new
  end
  local bk = sp .. 'seen:' .. b
  local s = cache[bk]
  if s == nil then s = redis.call('GET', bk) or '' end
  if has(s, fp) then
    cache[bk] = s
    return false
  end
  redis.call('APPEND', bk, fp)
  cache[bk] = s .. fp
  return true
end

local function touch(host)
  local q = sp .. 'q:' .. host
  local n = redis.call('ZCARD', q)
  local inf = tonumber(redis.call('HGET', sp .. 'inf', host) or '0')
  local old = redis.call('HGET', sp .. 'rm', host)
  if n > 0 and inf < conc then
    local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    local depth = math.floor(tonumber(head[2]) / SEQ) % 1024
    local member = string.format('%04d', depth) .. host
    local nb = redis.call('HGET', sp .. 'nb', host) or '0'
    if old and old ~= member then redis.call('ZREM', sp .. 'ready', old) end
    redis.call('ZADD', sp .. 'ready', nb, member)
    if old ~= member then redis.call('HSET', sp .. 'rm', host, member) end
  elseif old then
    redis.call('ZREM', sp .. 'ready', old)
    redis.call('HDEL', sp .. 'rm', host)
  end
  if n > 0 or inf > 0 then
    redis.call('SADD', sp .. 'active', host)
  else
    redis.call('SREM', sp .. 'active', host)
  end
end

local function delay(host, nb)
  local cur = tonumber(redis.call('HGET', sp .. 'nb', host) or '0')
  if nb > cur then redis.call('HSET', sp .. 'nb', host, fmt(nb)) end
end

local function new_token()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', sp .. 'tok') or '0')
  if us <= last then us = last + 1 end
  local s = string.format('%.0f', us)
  redis.call('SET', sp .. 'tok', s)
  return s
end

-- host, score, member of a lease record
local function parse_rec(rec)
  local a = string.find(rec, '\n', 1, true)
  local b = string.find(rec, '\n', a + 1, true)
  return string.sub(rec, 1, a - 1), string.sub(rec, a + 1, b - 1), string.sub(rec, b + 1)
end

local function release(tok, host, member)
  redis.call('HDEL', sp .. 'lease', tok)
  redis.call('ZREM', sp .. 'leases', tok)
  redis.call('HDEL', sp .. 'lfp', string.sub(member, 1, 16))
  if redis.call('HDEL', sp .. 'rel', tok) == 0 then
    if redis.call('HINCRBY', sp .. 'inf', host, -1) <= 0 then
      redis.call('HDEL', sp .. 'inf', host)
    end
  end
  redis.call('HINCRBY', sp .. 'n', 'leased', -1)
end

local function reclaim(now)
  local toks = redis.call('ZRANGEBYSCORE', sp .. 'leases', '-inf', '(' .. fmt(now))
  for _, tok in ipairs(toks) do
    local host, score, member = parse_rec(redis.call('HGET', sp .. 'lease', tok))
    release(tok, host, member)
    redis.call('ZADD', sp .. 'q:' .. host, score, member)
    redis.call('HINCRBY', sp .. 'n', 'pending', 1)
    touch(host)
  end
end

-- the pending member of KEY16 in the host's queue, or nil (rare paths: force, mark_done)
local function find_pending(host, key)
  local members = redis.call('ZRANGE', sp .. 'q:' .. host, 0, -1)
  for _, m in ipairs(members) do
    if string.sub(m, 1, 16) == key then return m end
  end
  return nil
end

-- a call repeated (ARGV[#ARGV] == '1') after its reply was lost, for a token it settled
local function settled(tok)
  return ARGV[#ARGV] == '1' and redis.call('ZSCORE', sp .. 'settled', tok) ~= false
end

local function settle(tok)
  redis.call('ZADD', sp .. 'settled', tok, tok)
  redis.call('ZREMRANGEBYRANK', sp .. 'settled', 0, -4097)
end

-- a lease record checked against the caller's token and host, or nil
local function get_rec(tok, host)
  local rec = redis.call('HGET', sp .. 'lease', tok)
  if not rec then return nil end
  local h, score, member = parse_rec(rec)
  if h ~= host then return nil end
  return score, member
end
"""
)

#: ARGV: sp-args(4), force, then 8 per request: fp8 (or Bloom positions), fp16, bucket (or
#: ``b``), host, pd, json, fkey16, requested_url. Returns {skew, i0, i1, ...}: 0-based
#: indexes of the requests enqueued.
ADD = (
    _LIB
    + r"""
local force = ARGV[5] == '1'
local cache = {}
local touched = {}
local out = {fmt(skew)}
local function enqueue(host, key, pd, js)
  local seq = redis.call('INCR', sp .. 'seq')
  redis.call('ZADD', sp .. 'q:' .. host, fmt(pd * SEQ + seq), key .. '0|' .. js)
  redis.call('HINCRBY', sp .. 'n', 'pending', 1)
  touched[host] = true
end
for i = 6, #ARGV, 8 do
  local fp16, host = ARGV[i + 1], ARGV[i + 3]
  local pd, js, fk, reqd = tonumber(ARGV[i + 4]), ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  if seen_add(ARGV[i], ARGV[i + 2], cache) then
    enqueue(host, fp16, pd, js)
    out[#out + 1] = (i - 6) / 8
  else
    if force then
      local blocked = false
      if redis.call('HEXISTS', sp .. 'lfp', fp16) == 0 then
        local m = find_pending(host, fp16)
        if m then
          local bar = string.find(m, '|', 17, true)
          local r = cjson.decode(string.sub(m, bar + 1))
          local req = r[4]  -- origin_url (absent or null: the url itself)
          if type(req) ~= 'string' then req = r[1] end
          if req == reqd then blocked = true end
        end
      end
      local fstate = redis.call('HGET', sp .. 'forced', fk)
      if fstate == '1' then blocked = true end
      if not blocked then
        if fstate == 'd' then redis.call('HINCRBY', sp .. 'n', 'done', -1) end
        redis.call('HSET', sp .. 'forced', fk, 1)
        enqueue(host, fk, pd, js)
        out[#out + 1] = (i - 6) / 8
      end
    end
  end
end
for host, _ in pairs(touched) do touch(host) end
return out
"""
)

#: ARGV: sp-args(4), now. Reclaims expired leases. Returns {skew}.
RECLAIM = (
    _LIB
    + r"""
reclaim(tonumber(ARGV[5]) + skew)
return {fmt(skew)}
"""
)

#: ARGV: sp-args(4), now, ttl. Returns {skew} (nothing ready) or {skew, token_us, host,
#: member, expires_at (caller's clock)}.
LEASE = (
    _LIB
    + r"""
local now = tonumber(ARGV[5]) + skew
reclaim(now)
local cands = redis.call('ZRANGEBYSCORE', sp .. 'ready', '-inf', fmt(now), 'LIMIT', 0, 1)
if #cands == 0 then return {fmt(skew)} end
local host = string.sub(cands[1], 5)
local q = sp .. 'q:' .. host
local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
local member, score = head[1], head[2]
redis.call('ZREM', q, member)
redis.call('HINCRBY', sp .. 'inf', host, 1)
redis.call('HINCRBY', sp .. 'n', 'pending', -1)
redis.call('HINCRBY', sp .. 'n', 'leased', 1)
local tok = new_token()
local exp = now + tonumber(ARGV[6])
redis.call('ZADD', sp .. 'leases', fmt(exp), tok)
redis.call('HSET', sp .. 'lease', tok, host .. '\n' .. score .. '\n' .. member)
redis.call('HSET', sp .. 'lfp', string.sub(member, 1, 16), tok)
touch(host)
return {fmt(skew), tok, host, member, fmt(exp - skew)}
"""
)

#: ARGV: sp-args(4), token_us, host, not_before, spender (a worker id: the ack spends one
#: page of its ``--max-pages`` reservation, counted in ``acks``; or ''), repeat(0|1: the call
#: is sent again after a lost reply). Returns {skew, 1 done | 2 already done by the first
#: try | 0 stale, the spender's count in ``acks`` (0 without one)}.
ACK = (
    _LIB
    + r"""
local tok, host, spender = ARGV[5], ARGV[6], ARGV[8]
local score, member = get_rec(tok, host)
if not score then
  if settled(tok) then
    local n = spender ~= '' and redis.call('HGET', sp .. 'acks', spender) or '0'
    return {fmt(skew), 2, n or '0'}
  end
  return {fmt(skew), 0, '0'}
end
release(tok, host, member)
settle(tok)
local spent = 0
if spender ~= '' then spent = redis.call('HINCRBY', sp .. 'acks', spender, 1) end
local key = string.sub(member, 1, 16)
if redis.call('HEXISTS', sp .. 'forced', key) == 1 then
  redis.call('HSET', sp .. 'forced', key, 'd')
end
redis.call('DEL', sp .. 'il:' .. key)
redis.call('HINCRBY', sp .. 'n', 'done', 1)
local t = redis.call('TIME')
local bucket = math.floor(tonumber(t[1]) / RATE_BUCKET)
if redis.call('HINCRBY', sp .. 'rate', bucket, 1) == 1 then
  for _, b in ipairs(redis.call('HKEYS', sp .. 'rate')) do
    if tonumber(b) < bucket - RATE_BUCKETS then redis.call('HDEL', sp .. 'rate', b) end
  end
end
delay(host, tonumber(ARGV[7]) + skew)
touch(host)
return {fmt(skew), 1, tostring(spent)}
"""
)

#: ARGV: sp-args(4), token_us, host, not_before. Returns {skew, 1} (released, or already)
#: or {skew, 0} (stale token): the host's slot is freed, the lease stays (Frontier.release).
RELEASE = (
    _LIB
    + r"""
local tok, host = ARGV[5], ARGV[6]
local score, member = get_rec(tok, host)
if not score then return {fmt(skew), 0} end
if redis.call('HSETNX', sp .. 'rel', tok, '1') == 1 then
  if redis.call('HINCRBY', sp .. 'inf', host, -1) <= 0 then
    redis.call('HDEL', sp .. 'inf', host)
  end
  delay(host, tonumber(ARGV[7]) + skew)
  touch(host)
end
return {fmt(skew), 1}
"""
)

#: ARGV: sp-args(4), token_us, host, not_before, count_attempt(1|0), repeat(0|1). Returns
#: {skew, 1|2|0} as ACK.
RETRY = (
    _LIB
    + r"""
local tok, host = ARGV[5], ARGV[6]
local score, member = get_rec(tok, host)
if not score then
  if settled(tok) then return {fmt(skew), 2} end
  return {fmt(skew), 0}
end
release(tok, host, member)
settle(tok)
if ARGV[8] == '1' then
  local bar = string.find(member, '|', 17, true)
  local att = tonumber(string.sub(member, 17, bar - 1)) + 1
  member = string.sub(member, 1, 16) .. att .. string.sub(member, bar)
end
redis.call('ZADD', sp .. 'q:' .. host, score, member)
redis.call('HINCRBY', sp .. 'n', 'pending', 1)
delay(host, tonumber(ARGV[7]) + skew)
touch(host)
return {fmt(skew), 1}
"""
)

#: ARGV: sp-args(4), token_us, host, now, ttl. Returns {skew, expires_at or ''}.
RENEW = (
    _LIB
    + r"""
local tok, host = ARGV[5], ARGV[6]
local score, member = get_rec(tok, host)
if not score then return {fmt(skew), ''} end
local exp = tonumber(ARGV[7]) + skew + tonumber(ARGV[8])
redis.call('ZADD', sp .. 'leases', 'XX', fmt(exp), tok)
return {fmt(skew), fmt(exp - skew)}
"""
)

#: ARGV: sp-args(4), host, not_before. Returns {skew}.
DELAY = (
    _LIB
    + r"""
delay(ARGV[5], tonumber(ARGV[6]) + skew)
touch(ARGV[5])
return {fmt(skew)}
"""
)

#: ARGV: sp-args(4), then 4 per URL: fp8 (or Bloom positions), fp16, bucket (or ``b``),
#: host. Returns {skew}.
MARK_DONE = (
    _LIB
    + r"""
for i = 5, #ARGV, 4 do
  local fp16, host = ARGV[i + 1], ARGV[i + 3]
  if seen_add(ARGV[i], ARGV[i + 2], {}) then
    redis.call('HINCRBY', sp .. 'n', 'done', 1)
  else
    local tok = redis.call('HGET', sp .. 'lfp', fp16)
    if tok then
      local h, score, member = parse_rec(redis.call('HGET', sp .. 'lease', tok))
      release(tok, h, member)
      redis.call('HINCRBY', sp .. 'n', 'done', 1)
      touch(h)
    else
      local m = find_pending(host, fp16)
      if m then
        redis.call('ZREM', sp .. 'q:' .. host, m)
        redis.call('HINCRBY', sp .. 'n', 'pending', -1)
        redis.call('HINCRBY', sp .. 'n', 'done', 1)
        touch(host)
      end
    end
  end
end
return {fmt(skew)}
"""
)

#: ARGV: sp-args(4), then 3 per pair: target KEY16, target host, source host. Returns
#: {skew, changes}: a pending target linked from a new other host gets priority - 1.
NOTE_INLINKS = (
    _LIB
    + r"""
local changed = 0
local touched = {}
for i = 5, #ARGV, 3 do
  local key, host, src = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if src ~= host then
    local m = find_pending(host, key)
    if m and redis.call('SADD', sp .. 'il:' .. key, src) == 1 then
      local q = sp .. 'q:' .. host
      local score = tonumber(redis.call('ZSCORE', q, m))
      local bar = string.find(m, '|', 17, true)
      local r = cjson.decode(string.sub(m, bar + 1))
      local prio = r[6] or 0
      if prio > -512 then
        if r[2] == nil then r[2] = 0 end
        if r[3] == nil then r[3] = cjson.null end
        if r[4] == nil then r[4] = cjson.null end
        if r[5] == nil then r[5] = {} end
        r[6] = prio - 1
        if r[7] == nil then r[7] = 0 end
        redis.call('ZREM', q, m)
        local js = cjson.encode(r)
        redis.call('ZADD', q, fmt(score - 1024 * SEQ), string.sub(m, 1, bar) .. js)
        changed = changed + 1
        touched[host] = true
      end
    end
  end
end
for host, _ in pairs(touched) do touch(host) end
return {fmt(skew), changed}
"""
)

#: KEYS: a shard's ``bloom`` key; ARGV: its last bit. Allocates a missing Bloom filter at its
#: full length (all zero) in one go; an existing one is left as it is.
BLOOM_PRESIZE = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SETBIT', KEYS[1], ARGV[1], 0) end
return 0
"""
