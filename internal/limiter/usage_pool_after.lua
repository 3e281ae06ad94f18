-- usage_pool_after.lua: the end of usage_pool.lua (see there): the
-- report's charge or refund to the pools, once, and the reply.
if dup == 0 and cost ~= 0 and redis.call('SET', ufence, '1', 'NX', 'PX', 60000) then
	for j = 1, pm do
		local c = cost
		if c < 0 then
			local charged = tonumber(redis.call('GET', ucharged[j]) or '0') or 0
			c = -math.min(-c, charged)
		end
		if c ~= 0 then
			redis.call('DECRBY', upools[j], c)
			redis.call('INCRBY', ucharged[j], c)
			redis.call('PEXPIREAT', upools[j], uexp[j])
			redis.call('PEXPIREAT', ucharged[j], uexp[j])
		end
	end
end
return out
