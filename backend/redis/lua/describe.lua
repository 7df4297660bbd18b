-- describe: the state of one name, read at one instant. Returns {now ms,
-- HGETALL of the state, the queued lease IDs in order}.
local t = redis.call('TIME')
return {math.floor((t[1] * 1000000 + t[2]) / 1000), redis.call('HGETALL', KEYS[1]), redis.call('ZRANGE', KEYS[2], 0, -1)}
