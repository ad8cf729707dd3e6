package http

// StatusOf is the table of error codes to statuses, for the fuzz targets'
// check that an answer's status matches its code.
var StatusOf = statusOf

// ConnectionLimitFor exposes connectionLimit to the tests: the cap for a
// configured value and a descriptor limit.
var ConnectionLimitFor = connectionLimit
