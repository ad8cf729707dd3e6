package http

// ConnectionLimitFor exposes connectionLimit to the tests: the cap for a
// configured value and a descriptor limit.
var ConnectionLimitFor = connectionLimit
