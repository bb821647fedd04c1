-- Write-heavy: half the requests move a unit between two random entries
-- under the write lock, half read one entry.
package.path = package.path .. ";" .. (os.getenv("WRK_DIR") or ".") .. "/?.lua"
local common = require("common")

function init(args)
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

function request()
  if math.random() < 0.5 then
    return wrk.format("POST", "/transfer/" .. math.random(0, 4095) .. "/" .. math.random(0, 4095))
  end
  return wrk.format("GET", "/item/" .. math.random(0, 4095))
end

done = common.done
