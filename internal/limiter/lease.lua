-- lease.lua: the end of a lease's charge (lease.go) for a request with a
-- quota. The script is bucket.lua, charge.lua with every_end set (every
-- quota's window end is read), then this file: a lease is decided and
-- charged exactly as a charge of its cost (k requests' worth), and its
-- reply names the windows it charged, so that the lease never outlives
-- one and lease_return.lua gives a quota's unused tokens back only to the
-- window that ends then (a lease charged before a window ended gives
-- nothing to the next one). A request's floor applies to the lease's whole
-- charge (it needs cost + floor), so a lease never dips below it. A lease
-- of token buckets only is a plain charge (charge.lua's script).
--
-- KEYS, ARGV: charge.lua's.
--
-- Reply: charge.lua's, followed per bucket by " <window end> <until>": a
-- quota's window end (Unix ms, 1 ms after its key's expiry) and the whole
-- milliseconds until it; "0 0" for a token bucket (or a blocked quota).

for i = 1, n do
	if st[4 * i - 1] == -1 then
		local at = st[4 * i - 3]
		out = out .. format(' %d %d', floor(at / 1000) + 1704067200000, floor((at - now) / 1000))
	else
		out = out .. ' 0 0'
	end
end
return out
