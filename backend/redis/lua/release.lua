-- release: end the lease ARGV[1] and hand its permits to the waiters.
-- ARGV: 1 lease ID, 2 '1' if a waiter whose channel has no subscriber is
-- gone. Returns 1, or 0 if no live lease has that ID (nothing changes).
local id = ARGV[1]
local us, ms = clock()
local m, rec = load(id)
if not rec or string.byte(rec, 1) ~= 104 then return 0 end
local w, _, _, exp, _, rev = parseHolder(rec)
if rev == '1' or exp <= ms then return 0 end
if m.q > 0 then readToken() end
if m.h == 1 and m.q == 0 then -- the last lease: nothing but the token stays
  redis.call('DEL', S, Q)
  return 1
end
redis.call('HDEL', S, id)
m.u, m.h, m.dirty = m.u - w, m.h - 1, true
reclaim(m, ms)
serve(m, us, ms, nil, ARGV[2] == '1')
save(m)
return 1
