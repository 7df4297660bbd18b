-- Shared by the scripts that change a name (scripts.go puts it before
-- each). KEYS: 1 the name's state hash, 2 its queue, 3 its token counter.
--
-- The state hash holds the name's counters in one field, '.m':
-- "<limit> <used> <holders> <waiters> <next> <expiry> <ticket>" — the limit,
-- the weight its live holders hold, the number of holder records
-- (force-released ones included), the number of queued waiters, a lower
-- bound of the earliest holder expiry, when the keys expire, and the last
-- waiter ticket; and one record per lease ID:
--
--   holder: h<weight> <token> <acquired> <expires> <renewed> <revoked>\31<label>
--
-- <revoked> is 0 for a live lease, 1 for one force-released whose permits
-- are free, 2 for one force-released whose permits stay taken until it
-- expires or its holder releases it.
--   waiter: w<weight> <since> <expires> <ttl> <channel>\31<label>
--
-- Times are milliseconds of Redis's clock (TIME); <label> is
-- "<pid>\31<owner>\31<host>" as the client sent it. Lease IDs hold no '.',
-- so they never collide with the counters.
local S, Q, T = KEYS[1], KEYS[2], KEYS[3]
local NONE = 9000000000000000 -- .n when there is no holder
local SLACK = 10000 -- ms the keys outlive the latest expiry they must cover

-- clock returns Redis's time in microseconds and in milliseconds.
local function clock()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]
  return us, math.floor(us / 1000)
end

local function corrupt(what)
  error({err = 'SEMACORRUPT ' .. S .. ': ' .. what})
end

-- load reads the counters and the record of id from v, the answer of
-- HMGET state .m id; m.dirty says whether the counters must be written
-- back.
local function load(v)
  if not v[1] then
    return {l = 0, u = 0, h = 0, q = 0, n = NONE, x = 0, s = 0, puts = {}, dels = {}}, v[2]
  end
  local l, u, h, q, n, x, s = string.match(v[1], '^(%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%S+) (%d+) (%d+)$')
  n = tonumber(n)
  if not n then corrupt('bad counters ' .. v[1]) end
  return {l = tonumber(l), u = tonumber(u), h = tonumber(h), q = tonumber(q), n = n, x = tonumber(x), s = tonumber(s),
    puts = {}, dels = {}}, v[2]
end

-- fetch reads the counters and the record of id.
local function fetch(id)
  return load(redis.call('HMGET', S, '.m', id))
end

-- The records are written with string.format('%d'): cheaper than Lua's
-- own conversion of a number to text, which formats it as a float.
local function counters(m)
  return string.format('%d %d %d %d %d %d %d', m.l, m.u, m.h, m.q, m.n, m.x, m.s)
end

local function parseHolder(r)
  local w, tok, acq, exp, ren, rev, lbl = string.match(r, '^h(%d+) (%d+) (%d+) (%d+) (%d+) ([012])\31(.*)$')
  if not w then corrupt('bad holder record') end
  return tonumber(w), tok, acq, tonumber(exp), ren, rev, lbl
end

-- parseWaiter returns nil for a malformed record, which the caller drops
-- like an expired waiter (it may have made changes already).
local function parseWaiter(r)
  local w, since, exp, ttl, ch, lbl = string.match(r, '^w(%d+) (%d+) (%d+) (%d+) ([^\31]*)\31(.*)$')
  if not w then return nil end
  return tonumber(w), since, tonumber(exp), tonumber(ttl), ch, lbl
end

local function holderRecord(w, tok, acq, exp, ren, rev, lbl)
  return string.format('h%d %s %d %d %d %s\31%s', w, tok, acq, exp, ren, rev, lbl)
end

local function waiterRecord(w, since, exp, ttl, ch, lbl)
  return string.format('w%d %d %d %d %s\31%s', w, since, exp, ttl, ch, lbl)
end

-- The token counter: read before a script's first write (a key of the
-- wrong type then fails the script before it changed anything), and
-- written once. A script whose first write is a grant reads it with
-- firstToken instead.
local lastToken, tokenDirty
local function readToken()
  if not lastToken then
    local v = redis.call('GET', T)
    lastToken = v and tonumber(v)
    if v and not lastToken then corrupt('bad token counter') end
    lastToken = lastToken or 0
  end
end

-- nextToken returns a token above every one issued, and at least Redis's
-- clock in microseconds: if the counter was lost (a restart without
-- persistence, a failover to a replica that missed it), tokens still go
-- up as long as that clock does.
local function nextToken(us)
  local tok = lastToken + 1
  if tok < us then tok = us end
  lastToken, tokenDirty = tok, true
  return string.format('%d', tok)
end

local function writeToken()
  if tokenDirty then redis.call('SET', T, string.format('%d', lastToken)) end
end

-- firstToken is readToken and nextToken in one call, for a script that
-- has written nothing yet: it sets the counter to the clock and reads what
-- it held. As the first write it, too, fails on a key of the wrong type
-- before any other change.
local function firstToken(us)
  local now = string.format('%d', us)
  local old = redis.call('SET', T, now, 'GET')
  old = old and tonumber(old) or 0
  if old < us then
    lastToken = us
    return now
  end
  lastToken, tokenDirty = old, false
  return nextToken(us)
end

-- keep makes the keys live past upto (ms); save sets their expiry.
local function keep(m, upto)
  if upto > m.x then
    m.x, m.dirty, m.expire = upto + SLACK, true, true
  end
end

-- reclaim drops the holders whose expiry has passed and recomputes .n.
-- It returns the state's fields and values when it read them.
local function reclaim(m, ms)
  if ms < m.n then return nil end
  local all = redis.call('HGETALL', S)
  local dead, n = {}, NONE
  for i = 1, #all, 2 do
    local r = all[i + 1]
    if string.byte(r, 1) == 104 then -- 'h'
      local w, _, _, exp, _, rev = parseHolder(r)
      if exp <= ms then
        dead[#dead + 1] = all[i]
        if rev ~= '1' then m.u = m.u - w end
        m.h = m.h - 1
      elseif exp < n then
        n = exp
      end
    end
  end
  for i = 1, #dead, 1000 do
    redis.call('HDEL', S, unpack(dead, i, math.min(i + 999, #dead)))
  end
  m.n, m.dirty = n, true
  if #dead > 0 then all = nil end
  return all
end

-- put and del queue changes of records for save, which makes them with
-- one HDEL and one HSET (with the counters).
local function put(m, f, r)
  m.puts[#m.puts + 1] = f
  m.puts[#m.puts + 1] = r
end

local function del(m, f)
  m.dels[#m.dels + 1] = f
end

-- serve grants the queue's head waiters, in order, while their weight
-- fits, and tells each by a message on its channel. With live set, a
-- waiter whose channel has no subscriber (its process is gone) is dropped
-- instead. It returns the grant of self (a lease ID) if self was served.
local function serve(m, us, ms, self, live)
  local mine
  while m.q > 0 and m.u < m.l do
    -- At most l-u waiters can be served (weights are at least 1); take
    -- them a hundred at a time.
    local heads = redis.call('ZRANGE', Q, 0, math.min(m.q, m.l - m.u, 100) - 1)
    if #heads == 0 then
      m.q, m.dirty = 0, true
      break
    end
    local recs = redis.call('HMGET', S, unpack(heads))
    local gone, blocked = {}, false
    for i, head in ipairs(heads) do
      local r = recs[i]
      local w, exp, ttl, ch, lbl, _
      if r and string.byte(r, 1) == 119 then w, _, exp, ttl, ch, lbl = parseWaiter(r) end
      if not w or exp <= ms then -- stale, malformed or expired: drop it
        if r and string.byte(r, 1) ~= 104 then del(m, head) end
      elseif m.u + w > m.l then
        blocked = true
        break
      else
        local tok = lastToken and nextToken(us) or firstToken(us)
        local ends = ms + ttl
        local granted = true
        if head ~= self then
          local n = redis.call('PUBLISH', ch, string.format('%s %s %d %d', head, tok, ms, ends))
          granted = n > 0 or not live
        end
        if granted then
          put(m, head, holderRecord(w, tok, ms, ends, ms, '0', lbl))
          m.u, m.h = m.u + w, m.h + 1
          if ends < m.n then m.n = ends end
          keep(m, ends)
          if head == self then mine = {tok, ms, ends} end
        else
          del(m, head)
        end
      end
      gone[#gone + 1] = head
    end
    if #gone > 0 then
      redis.call('ZREM', Q, unpack(gone))
      m.q, m.dirty = m.q - #gone, true
    end
    if blocked then break end
  end
  return mine
end

-- save writes the queued record changes and the counters back, or deletes
-- the name's state when it has no holder and no waiter left (only the
-- token counter stays).
local function save(m)
  if m.h <= 0 and m.q <= 0 then
    redis.call('DEL', S, Q)
  else
    if #m.dels > 0 then redis.call('HDEL', S, unpack(m.dels)) end
    if #m.puts > 0 or m.dirty then
      put(m, '.m', counters(m))
      redis.call('HSET', S, unpack(m.puts))
    end
    if m.expire then
      redis.call('PEXPIREAT', S, m.x)
      if m.q > 0 then redis.call('PEXPIREAT', Q, m.x) end
    end
  end
  writeToken()
end

-- holders lists the IDs and records of the holders whose permits are
-- taken (live, or force-released and not yet expired), from all (HGETALL of
-- the state) if given; malformed records are left out.
local function holders(ms, all)
  all = all or redis.call('HGETALL', S)
  local out = {}
  for i = 1, #all, 2 do
    local r = all[i + 1]
    if string.byte(r, 1) == 104 then
      local exp, rev = string.match(r, '^h%d+ %d+ %d+ (%d+) %d+ ([012])\31')
      if exp and tonumber(exp) > ms and rev ~= '1' then
        out[#out + 1] = all[i]
        out[#out + 1] = r
      end
    end
  end
  return out
end
