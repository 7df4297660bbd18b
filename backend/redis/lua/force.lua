-- force: an admin ends the lease ARGV[1], or every lease if it is empty.
-- The records stay, marked revoked, until they expire, so that a renewal
-- learns it was force-released. ARGV: 1 lease ID or '', 2 '1' if a waiter
-- whose channel has no subscriber is gone. Returns {id, record, ...} of
-- the leases ended.
local id = ARGV[1]
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
    if exp > ms and rev == '0' then hs = {id, r} end
  end
end
for i = 1, #hs, 2 do
  local w, tok, acq, exp, ren, _, lbl = parseHolder(hs[i + 1])
  put(m, hs[i], holderRecord(w, tok, acq, exp, ren, '1', lbl))
  m.u, m.dirty = m.u - w, true
end
serve(m, us, ms, nil, ARGV[2] == '1')
save(m)
return hs
