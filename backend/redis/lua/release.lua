-- release: end the lease ARGV[1] and hand its permits to the waiters.
-- ARGV: 1 lease ID, 2 '1' if a waiter whose channel has no subscriber is
-- gone. Returns 1, or 0 if no live lease has that ID (nothing changes).
-- The common case first, before the shared code below is even defined:
-- the only lease of a name nobody waits for ends, and the name's state
-- goes with it (the token counter stays).
local v = redis.call('HMGET', KEYS[1], '.m', ARGV[1])
local t = redis.call('TIME')
local us = t[1] * 1000000 + t[2]
local ms = math.floor(us / 1000)
local r = v[2]
if r and v[1] and string.byte(r, 1) == 104 then
  local h, q = string.match(v[1], '^%d+ %-?%d+ (%-?%d+) (%-?%d+) ')
  local exp, rev = string.match(r, '^h%d+ %d+ %d+ (%d+) %d+ ([01])\31')
  if h == '1' and q == '0' and rev == '0' and exp and tonumber(exp) > ms then
    redis.call('DEL', KEYS[1], KEYS[2])
    return 1
  end
end
--@common
local id = ARGV[1]
local m, rec = load(v)
if not rec or string.byte(rec, 1) ~= 104 then return 0 end
local w, _, _, exp, _, rev = parseHolder(rec)
if rev == '1' or exp <= ms then return 0 end
if ms >= m.n then readToken() end -- reclaim writes first
if m.h == 1 and m.q == 0 then -- the last lease: nothing but the token stays
  redis.call('DEL', S, Q)
  return 1
end
del(m, id)
m.u, m.h, m.dirty = m.u - w, m.h - 1, true
reclaim(m, ms)
serve(m, us, ms, nil, ARGV[2] == '1')
save(m)
return 1
