-- acquire: grant ARGV[1] now, or queue it, or refuse.
-- ARGV: 1 lease ID, 2 limit, 3 weight, 4 TTL ms, 5 label, 6 mode ('t' try:
-- never queue; 'w' wait: queue, or refresh the queued waiter's lease),
-- 7 waiter lease ms, 8 the waiter's wake-up channel, 9 '1' if a waiter
-- whose channel has no subscriber is gone.
-- Returns {1, token, acquired, expires, now} granted; {2, now, position,
-- earliest holder expiry} queued; {0, limit, waiters, id, record, ...}
-- held; {-1, limit} limit mismatch; {-3} the ID was force-released; {-4,
-- weight} the ID holds another weight.
-- The common case first, before the shared code below is even defined: a
-- name with no holder and no waiter (no state) is granted at once.
local t = redis.call('TIME')
local us = t[1] * 1000000 + t[2]
local ms = math.floor(us / 1000)
local v = redis.call('HMGET', KEYS[1], '.m', ARGV[1])
if not v[1] and not v[2] then
  -- The token: at least the clock in µs, above the counter.
  local tok = string.format('%d', us)
  local old = redis.call('SET', KEYS[3], tok, 'GET')
  if old and tonumber(old) >= us then
    tok = string.format('%d', tonumber(old) + 1)
    redis.call('SET', KEYS[3], tok)
  end
  -- Numbers become text by string.format('%d'), as in common.lua.
  local exp = ms + ARGV[4]
  local x = string.format('%d', exp + 10000) -- SLACK
  redis.call('HSET', KEYS[1], ARGV[1], string.format('h%s %s %d %d %d 0\31%s', ARGV[3], tok, ms, exp, ms, ARGV[5]),
    '.m', string.format('%s %s 1 0 %d %s 0', ARGV[2], ARGV[3], exp, x))
  redis.call('PEXPIREAT', KEYS[1], x)
  return {1, tok, ms, exp, ms}
end
--@common
local id, limit, weight, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local m, rec = load(v)
if rec and string.byte(rec, 1) == 104 then parseHolder(rec) end -- fail before any change
-- A waiter can be served only if permits are free (or expire now).
local serving = m.q > 0 and (m.u < m.l or ms >= m.n)
if ms >= m.n then readToken() end -- reclaim writes first
local all = reclaim(m, ms)
if serving then
  local mine = serve(m, us, ms, id, ARGV[9] == '1')
  if mine then
    save(m)
    return {1, mine[1], mine[2], mine[3], ms}
  end
  if rec and string.byte(rec, 1) == 119 then rec = redis.call('HGET', S, id) end
end

if rec and string.byte(rec, 1) == 104 then
  local w, tok, acq, exp, _, rev = parseHolder(rec)
  if rev ~= '0' then
    save(m)
    return {-3}
  end
  if exp > ms then -- a retry of a live grant: the same lease, if asked alike
    save(m)
    if m.l ~= limit then return {-1, m.l} end
    if w ~= weight then return {-4, w} end
    return {1, tok, tonumber(acq), exp, ms}
  end
  rec = nil -- expired: reclaim dropped it
end

if m.l ~= limit then
  if m.u > 0 or m.q > 0 then
    save(m)
    return {-1, m.l}
  end
  m.l, m.dirty = limit, true
end

local w, since, wttl, ch, lbl, _
if rec then w, since, _, wttl, ch, lbl = parseWaiter(rec) end
if rec and (not w or not redis.call('ZSCORE', Q, id)) then -- a record the queue lost
  readToken()
  redis.call('HDEL', S, id)
  m.q, m.dirty = m.q - redis.call('ZREM', Q, id), true
  rec = nil
end

if rec and ARGV[6] == 'w' then -- still queued: refresh the waiter's lease
  local exp = ms + tonumber(ARGV[7])
  keep(m, exp)
  put(m, id, waiterRecord(w, since, exp, wttl, ch, lbl))
  save(m)
  return {2, ms, redis.call('ZRANK', Q, id) or 0, m.n}
end

if not rec and m.q == 0 and m.u + weight <= m.l then
  local tok = lastToken and nextToken(us) or firstToken(us)
  local exp = ms + ttl
  m.u, m.h, m.dirty = m.u + weight, m.h + 1, true
  if exp < m.n then m.n = exp end
  keep(m, exp)
  put(m, id, holderRecord(weight, tok, ms, exp, ms, '0', ARGV[5]))
  save(m)
  return {1, tok, ms, exp, ms}
end

if ARGV[6] ~= 'w' then
  local out = {0, m.l, m.q}
  local hs = holders(ms, all)
  for i = 1, #hs do out[#out + 1] = hs[i] end
  save(m)
  return out
end

local exp = ms + tonumber(ARGV[7])
m.s, m.q, m.dirty = m.s + 1, m.q + 1, true
redis.call('ZADD', Q, m.s, id)
keep(m, exp)
if m.q == 1 then m.expire = true end
put(m, id, waiterRecord(weight, ms, exp, ttl, ARGV[8], ARGV[5]))
save(m)
return {2, ms, m.q - 1, m.n}
