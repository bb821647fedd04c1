-- Writers at a fixed rate: wrk ... -s writers.lua -- <route> <rate/s> <connections>
-- Each connection waits connections*1000/rate ms between its requests
-- (wrk's delay() hook), so the offered rate is fixed; the achieved rate is
-- what RESULT reports.
package.path = package.path .. ";" .. (os.getenv("WRK_DIR") or ".") .. "/?.lua"
local common = require("common")

local route, pause

function init(args)
  route = args[1] or "transfer"
  local rate = tonumber(args[2] or "500")
  local conns = tonumber(args[3] or "4")
  pause = math.max(1, math.floor(conns * 1000 / rate))
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

function delay()
  return pause
end

function request()
  return wrk.format("POST", "/" .. route .. "/" .. math.random(0, 4095) .. "/" .. math.random(0, 4095))
end

done = common.done
