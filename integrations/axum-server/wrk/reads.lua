-- Readers: GET /item/<random key>.
package.path = package.path .. ";" .. (os.getenv("WRK_DIR") or ".") .. "/?.lua"
local common = require("common")

function init(args)
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

function request()
  return wrk.format("GET", "/item/" .. math.random(0, 4095))
end

done = common.done
