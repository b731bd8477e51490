-- soak.lua: wrk script of tests/soak.sh: rotates paths, Accept-Encoding and byte ranges.
--
-- Environment (set by soak.sh):
--   SOAK_PATHS  the paths to rotate through, separated by spaces
--   SOAK_RANGE  a path for which some requests ask a byte range (206)
-- Every request should get a 2xx status: wrk counts the others. GET only,
-- and no conditional requests: wrk's parser does not know that a HEAD
-- response, or a 304 (which carries the Content-Length of its 200, RFC
-- 9110 section 8.6), has no body, and waits for one; soak.sh sends those
-- with curl.

local paths = {}
for p in string.gmatch(os.getenv("SOAK_PATHS") or "/", "%S+") do
	paths[#paths + 1] = p
end

local range_path = os.getenv("SOAK_RANGE")

-- "" sends no Accept-Encoding line at all.
local encodings = {
	"gzip", "gzip, deflate, br", "identity", "", "gzip;q=0", "*", "br;q=1, gzip;q=0.5",
	"x-gzip", "identity;q=1, gzip;q=0.5", "*;q=0, identity",
}

local n = 0

request = function()
	n = n + 1
	-- Paths in turn; the coding list advances once per round of paths,
	-- so every path meets every coding.
	local round = math.floor(n / #paths)
	local path = paths[(n % #paths) + 1]
	local ae = encodings[(round % #encodings) + 1]
	-- Ranges shift by a round too, so that they meet every coding.
	local k = n + round
	local hdr = {}

	if ae ~= "" then
		hdr["Accept-Encoding"] = ae
	end
	if k % 5 == 0 and path == range_path then
		hdr["Range"] = "bytes=100-1099"
	end
	return wrk.format("GET", path, hdr)
end
