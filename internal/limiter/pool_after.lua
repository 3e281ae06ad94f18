-- pool_after.lua: the end of pool.lua (see there): what a decision that allowed
-- charges to the pools, and the reply.
if allowed == 1 then
	local cmask = 0
	for j = 1, pm do
		if from_credit[j] then
			redis.call('INCRBY', credits[j], cs)
			redis.call('PEXPIREAT', credits[j], cexp[j])
			out = out .. ' ' .. (tonumber(redis.call('GET', pools[j]) or '0') or 0)
			cmask = cmask + 2 ^ (j - 1)
		else
			out = out .. ' ' .. redis.call('DECRBY', pools[j], cs)
		end
	end
	out = out .. string.format(' %d', cmask)
end
return out
