-- renew: extend the live lease ARGV[1] to ARGV[2] ms from now; never
-- re-create it. Returns {1, token, acquired, expires, weight}, {-2} if no
-- live lease has that ID, {-3} if it was force-released.
local id, ttl = ARGV[1], tonumber(ARGV[2])
local us, ms = clock()
local m, rec = fetch(id)
if not rec or string.byte(rec, 1) ~= 104 then return {-2} end
local w, tok, acq, exp, _, rev, lbl = parseHolder(rec)
if rev == '1' then return {-3} end
if exp <= ms then return {-2} end
exp = ms + ttl
if exp < m.n then m.n = exp end
keep(m, exp)
put(m, id, holderRecord(w, tok, acq, exp, ms, '0', lbl))
save(m)
return {1, tok, tonumber(acq), exp, w}
