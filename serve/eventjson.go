package serve

import (
	"encoding/json"
	"slices"
	"strconv"
)

// appendEvent appends json.Marshal(e) to dst. A run's events are maps of
// a few strings and numbers, which encoding/json encodes by reflection,
// its keys sorted through reflect.Values: a tenth of the CPU of a busy
// server's event writing went there. The keys are sorted here as
// encoding/json sorts them, and each value is written directly if it is
// a string that needs no escaping, an integer, a bool, nil or another
// such map, and by json.Marshal otherwise, so the bytes are always
// json.Marshal's.
func appendEvent(dst []byte, e map[string]any) ([]byte, error) {
	var arr [16]string
	keys := arr[:0]
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = appendJSONValue(dst, e[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSONValue appends json.Marshal(v) to dst.
func appendJSONValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(dst, v), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case nil:
		return append(dst, "null"...), nil
	case map[string]any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendEvent(dst, v)
	case event:
		if v == nil {
			return append(dst, "null"...), nil
		}
		return appendEvent(dst, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// appendJSONString appends json.Marshal(s) to dst: s quoted as is if
// every byte of it is printable ASCII that JSON leaves unescaped
// (encoding/json escapes '"', '\\', and '<', '>' and '&' for HTML), and
// by json.Marshal otherwise.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
