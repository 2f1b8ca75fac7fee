package toolruntest

import (
	"bytes"
	"encoding/json"
)

// The functions below find values in JSON that json.Unmarshal has already
// accepted, so they trust it to be well formed. They keep byte positions,
// which the token approximation needs and a decoder does not report.

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return i
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[i])) {
		i++
	}
	return i
}

// span is the position of a value: b[start:end].
type span struct{ start, end int }

// elements returns the spans of the elements of the JSON array b.
func elements(b []byte) []span {
	var out []span
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		end := skipValue(b, i)
		out = append(out, span{i, end})
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return out
}

// member is one member of a JSON object: its decoded key, and the spans of
// its key (quotes included) and of its value.
type member struct {
	key        string
	keyStart   int
	valueStart int
	valueEnd   int
}

// members returns the members of the JSON object b, in order.
func members(b []byte) []member {
	var out []member
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		keyEnd := skipValue(b, i)
		m := member{keyStart: i}
		if raw := b[i:keyEnd]; bytes.IndexByte(raw, '\\') < 0 {
			m.key = string(raw[1 : len(raw)-1])
		} else {
			json.Unmarshal(raw, &m.key)
		}
		i = skipSpace(b, keyEnd)
		i = skipSpace(b, i+1) // the colon
		m.valueStart = i
		m.valueEnd = skipValue(b, i)
		out = append(out, m)
		i = skipSpace(b, m.valueEnd)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return out
}

// field returns the value of the member key of the JSON object b, or nil.
func field(b []byte, key string) []byte {
	for _, m := range members(b) {
		if m.key == key {
			return b[m.valueStart:m.valueEnd]
		}
	}
	return nil
}

// withField returns the JSON object b with the member key set to value, or
// removed when value is nil, the other members as they were.
func withField(b []byte, key string, value []byte) []byte {
	var out []byte
	out = append(out, '{')
	set := false
	for _, m := range members(b) {
		v := b[m.valueStart:m.valueEnd]
		if m.key == key {
			if value == nil || set {
				continue
			}
			v, set = value, true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, b[m.keyStart:skipValue(b, m.keyStart)]...)
		out = append(out, ':')
		out = append(out, v...)
	}
	if !set && value != nil {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, mustMarshal(key)...)
		out = append(out, ':')
		out = append(out, value...)
	}
	return append(out, '}')
}

// canonical returns the JSON value b with the keys of its objects sorted and
// no insignificant whitespace, so that two values the API treats alike hash
// alike whatever order a client wrote their keys in.
func canonical(b []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return b
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return b
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
