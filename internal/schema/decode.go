package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxNesting bounds the nesting of a decoded value, as encoding/json does.
const maxNesting = 10000

// errTooDeep is returned for JSON nested deeper than the limit in force.
var errTooDeep = errors.New("nested too deeply")

// decoded is one JSON text decoded with numbers kept as json.Number, and
// the object keys that appear twice in one object.
type decoded struct {
	value any
	dups  []string // JSON Pointers of the second occurrence of each repeated key
	// numbers are the numbers that break the limits on numbers.
	numbers []badNumber
}

// decodeJSON decodes one JSON value from data. It reports an error in the
// words of json.Unmarshal, with the byte offset, since that is the clearest
// text for a model that sent broken JSON.
func decodeJSON(data []byte, maxDepth int) (*decoded, error) {
	if !json.Valid(data) {
		err := json.Unmarshal(data, new(any))
		if serr, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, fmt.Errorf("%s at offset %d", serr, serr.Offset)
		}
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, err
	}
	d := &decoded{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := d.value1(dec, nil, 0, maxDepth)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level value")
	}
	d.value = v
	return d, nil
}

func (d *decoded) value1(dec *json.Decoder, path []string, depth, maxDepth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		if n, ok := tok.(json.Number); ok {
			if bad := checkDecoded(n, path); bad != nil {
				d.numbers = append(d.numbers, *bad)
			}
		}
		return tok, nil
	}
	if depth >= maxDepth {
		return nil, errTooDeep
	}
	switch delim {
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := d.value1(dec, append(path, strconv.Itoa(len(arr))), depth+1, maxDepth)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	case '{':
		obj := map[string]any{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key := tok.(string)
			v, err := d.value1(dec, append(path, key), depth+1, maxDepth)
			if err != nil {
				return nil, err
			}
			if _, dup := obj[key]; dup {
				d.dups = append(d.dups, pointer(append(path, key)))
			}
			obj[key] = v
		}
		_, err := dec.Token()
		return obj, err
	}
	return nil, fmt.Errorf("unexpected %v", delim)
}

// pointerEscaper escapes a JSON Pointer's token. It is built once: a
// replacer built per token cost a validation of 95,000 failing items
// seconds.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer returns the RFC 6901 JSON Pointer of the given path.
func pointer(path []string) string {
	var b strings.Builder
	for _, tok := range path {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(tok))
	}
	return b.String()
}
