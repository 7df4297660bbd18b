-- force: an admin ends the lease ARGV[1], or every lease if it is empty.
-- The records stay, marked revoked, until they expire, so that a renewal
-- learns it was force-released. By default (revoked 2) their permits stay
-- taken until then, or until their holders release them; with ARGV[3]
-- '1' (revoked 1) they go to the waiters at once. ARGV: 1 lease ID or '',
-- 2 '1' if a waiter whose channel has no subscriber is gone, 3 '1' to free
-- the permits now. Returns {id, record, ...} of the leases ended.
local id, now = ARGV[1], ARGV[3] == '1'
local us, ms = clock()
local m = fetch('.none')
readToken()
local all = reclaim(m, ms)
local hs
if id == '' then
  hs = holders(ms, all)
else
  hs = {}
  local r = redis.call('HGET', S, id)
  if r and string.byte(r, 1) == 104 then
    local _, _, _, exp, _, rev = parseHolder(r)
    if exp > ms and rev ~= '1' then hs = {id, r} end
  end
end
for i = 1, #hs, 2 do
  local w, tok, acq, exp, ren, _, lbl = parseHolder(hs[i + 1])
  if now then
    put(m, hs[i], holderRecord(w, tok, acq, exp, ren, '1', lbl))
    m.u, m.dirty = m.u - w, true
  else
    put(m, hs[i], holderRecord(w, tok, acq, exp, ren, '2', lbl))
  end
end
if now then serve(m, us, ms, nil, ARGV[2] == '1') end
save(m)
return hs
