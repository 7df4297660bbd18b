-- dequeue: a waiter gives up. ARGV: 1 lease ID, 2 '1' if a waiter whose
-- channel has no subscriber is gone. A grant made to it meanwhile is given
-- back. Returns 2 dequeued, 1 a grant was given back, 0 neither was found.
local id = ARGV[1]
local us, ms = clock()
local m, rec = fetch(id)
if not rec then return 0 end
readToken()
local out
if string.byte(rec, 1) == 104 then
  local w, _, _, exp, _, rev = parseHolder(rec)
  if rev == '1' or exp <= ms then return 0 end
  m.u, m.h = m.u - w, m.h - 1
  out = 1
else
  m.q = m.q - redis.call('ZREM', Q, id)
  out = 2
end
del(m, id)
m.dirty = true
reclaim(m, ms)
serve(m, us, ms, nil, ARGV[2] == '1')
save(m)
return out
