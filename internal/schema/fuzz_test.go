package schema

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
)

// numericKeywords are the keywords FuzzNumbers puts a number under.
var numericKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "const", "enum", "uniqueItems"}

// FuzzNumbers: a number of any size, precision or shape, under every
// numeric keyword with a bound of any size, gets a verdict or a violation,
// never a panic or an internal error, and the verdict is the exact one
// (checked against big.Rat) whenever both numbers are within the limits.
func FuzzNumbers(f *testing.F) {
	for _, seed := range []struct {
		num   string
		kw    uint8
		bound string
	}{
		{"1e1000001", 0, "-90"},
		{"1e1000001", 1, "90"},
		{"-1e-1000001", 2, "0"},
		{"1E+1000001", 3, "0"},
		{"1e-1000001", 4, "0.01"},
		{"0." + strings.Repeat("3", 2000), 4, "0.01"},
		{"19.99", 4, "0.01"},
		{"3e-1000", 4, "1e-1000"},
		{"1e309", 1, "1"},
		{"-1e309", 0, "1"},
		{"1e-400", 0, "0"},
		{"12345678901234567890123", 1, "12345678901234567890122"},
		{"9007199254740993", 5, "9007199254740992"},
		{"1.0", 6, "1"},
		{"1e-5", 7, "0.00001"},
		{"1e1000001", 7, "1e1000001"},
		{"-0", 5, "0"},
		{"0.1e1", 5, "1"},
		{"01", 0, "0"},
		{"1.", 0, "0"},
		{".5", 0, "0"},
		{"1e", 0, "0"},
		{"--1", 0, "0"},
		{"NaN", 0, "0"},
		{"Infinity", 1, "0"},
		{"1e-00000000000000000000000000001", 4, "0.1"},
		{"1e123456789012345678901234567890", 0, "1e-1000"},
		{"5", 4, "1e1000001"},
		{"5", 4, "0"},
		{"5", 4, "-2"},
	} {
		f.Add(seed.num, seed.kw, seed.bound)
	}
	f.Fuzz(func(t *testing.T, num string, kw uint8, bound string) {
		keyword := numericKeywords[int(kw)%len(numericKeywords)]
		var schema, input string
		switch keyword {
		case "enum":
			schema = `{"properties":{"n":{"enum":[` + bound + `]}}}`
			input = `{"n":` + num + `}`
		case "uniqueItems":
			// More than 20 items, which are hashed, then compared.
			schema = `{"properties":{"n":{"uniqueItems":true}}}`
			input = `{"n":[` + strings.Repeat(bound+",", 20) + num + `]}`
		default:
			schema = `{"properties":{"n":{"` + keyword + `":` + bound + `}}}`
			input = `{"n":` + num + `}`
		}
		s, err := Compile([]byte(schema))
		if errors.Is(err, ErrInternal) {
			t.Fatalf("Compile(%s): %v", schema, err)
		}
		if err != nil {
			return
		}
		vs, err := s.Validate(t.Context(), []byte(input))
		if err != nil {
			t.Fatalf("Validate(%s) against %s: %v", input, schema, err)
		}
		if !isNumber(num) || !isNumber(bound) || checkNumber(json.Number(num)) != nil || checkFloat(json.Number(num)) != nil {
			return
		}
		if keyword == "uniqueItems" && (checkNumber(json.Number(bound)) != nil || checkFloat(json.Number(bound)) != nil) {
			return // bound is in the input, and refused there
		}
		x, ok1 := new(big.Rat).SetString(num)
		y, ok2 := new(big.Rat).SetString(bound)
		if !ok1 || !ok2 {
			t.Fatalf("numbers within the limits that big.Rat refuses: %q, %q", num, bound)
		}
		var want bool
		switch keyword {
		case "minimum":
			want = x.Cmp(y) >= 0
		case "maximum":
			want = x.Cmp(y) <= 0
		case "exclusiveMinimum":
			want = x.Cmp(y) > 0
		case "exclusiveMaximum":
			want = x.Cmp(y) < 0
		case "multipleOf":
			want = new(big.Rat).Quo(x, y).IsInt()
		case "const", "enum":
			want = x.Cmp(y) == 0
		case "uniqueItems":
			want = false // bound is there 20 times
		}
		if got := len(vs) == 0; got != want {
			t.Fatalf("%s against %s: valid %v, want %v (%+v)", input, schema, got, want, vs)
		}
	})
}

// isNumber reports whether s is one JSON number and nothing else.
func isNumber(s string) bool {
	var n json.Number
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return false
	}
	n, ok := v.(json.Number)
	return ok && string(n) == s
}
