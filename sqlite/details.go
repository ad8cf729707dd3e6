package sqlite

import (
	"encoding/json"
	"slices"
	"strconv"
)

// encodeDetails is json.Marshal of an event's details, byte for byte,
// without reflection for the details every step writes: string keys, and
// values that are strings, integers, booleans or nil. Any other value
// makes it fall back to json.Marshal for the whole map.
func encodeDetails(m map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		switch v.(type) {
		case string, int, int64, int32, bool, nil:
		default:
			return json.Marshal(m)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys) // json.Marshal's order
	out := make([]byte, 0, 32*len(keys)+2)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, k)
		out = append(out, ':')
		switch v := m[k].(type) {
		case string:
			out = appendString(out, v)
		case int:
			out = strconv.AppendInt(out, int64(v), 10)
		case int64:
			out = strconv.AppendInt(out, v, 10)
		case int32:
			out = strconv.AppendInt(out, int64(v), 10)
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
	}
	return append(out, '}'), nil
}

// appendString appends s as json.Marshal quotes it: as it is when it is
// printable ASCII with nothing to escape, else through json.Marshal
// (which escapes quotes, backslashes, control characters, <, > and &,
// U+2028 and U+2029, and replaces invalid UTF-8).
func appendString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(out, q...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}
