package http

// StatusOf is the table of error codes to statuses, for the fuzz targets'
// check that an answer's status matches its code.
var StatusOf = statusOf
