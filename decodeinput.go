package toolrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// decodeInput decodes a typed tool's input into in. JSON Schema counts 1.0
// and 1E2 as integers, so input the schema accepted for an int field may be
// written that way; encoding/json refuses it. When the plain decode fails
// on a number for an integer type, decodeInput writes every integral number
// of the input in integer form (1.0 as 1, 1E2 as 100: the same JSON values)
// and decodes again. A number that is not integral or does not fit the Go
// type is refused with a violation that says which, at its field.
func decodeInput(tool string, input json.RawMessage, in any) error {
	err := json.Unmarshal(input, in)
	if !intMismatch(err) {
		return decodeError(tool, in, err)
	}
	if rewritten, changed := integralNumbers(input); changed {
		reflect.ValueOf(in).Elem().SetZero()
		err = json.Unmarshal(rewritten, in)
	}
	return decodeError(tool, in, err)
}

// intMismatch reports whether err is a number refused by an integer type.
func intMismatch(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te) && strings.HasPrefix(te.Value, "number") && te.Type != nil && isIntKind(te.Type.Kind())
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// decodeError turns a decoding error into the ValidationError a typed tool
// returns, nil for nil.
func decodeError(tool string, in any, err error) error {
	if err == nil {
		return nil
	}
	v := Violation{
		Expected: "input that decodes into " + reflect.TypeOf(in).Elem().String(),
		Got:      err.Error(),
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			v.Pointer = "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		if lit, ok := strings.CutPrefix(te.Value, "number "); ok && te.Type != nil && isIntKind(te.Type.Kind()) {
			v.Got = oneLine(lit, 60) + " (number)"
			lo, hi := intRange(te.Type)
			if integralLiteral(lit) {
				v.Expected = fmt.Sprintf("an integer from %s to %s (Go %s)", lo, hi, te.Type)
			} else {
				v.Expected = fmt.Sprintf("an integer (Go %s)", te.Type)
			}
		}
	}
	return &ValidationError{Tool: tool, Violations: []Violation{v}}
}

// intRange returns the bounds of an integer type as decimal text.
func intRange(t reflect.Type) (lo, hi string) {
	bits := t.Bits()
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "0", fmt.Sprint(uint64(math.MaxUint64) >> (64 - bits))
	}
	return fmt.Sprint(int64(math.MinInt64) >> (64 - bits)), fmt.Sprint(int64(math.MaxInt64) >> (64 - bits))
}

// maxIntDigits bounds the integer form integralNumbers writes: no Go
// integer has more than 20 digits, so a longer one would be refused anyway
// and 1E1000000 is not spelled out.
const maxIntDigits = 20

// integralNumbers returns input with each number that has an integral
// value but a fraction or exponent (1.0, 1E2, 2.50e1) written as an
// integer of at most maxIntDigits digits. Strings are left as they are.
// input must be valid JSON.
func integralNumbers(input []byte) ([]byte, bool) {
	var out []byte
	last := 0
	for i := 0; i < len(input); {
		c := input[i]
		switch {
		case c == '"':
			i = skipString(input, i)
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(input) && strings.IndexByte("0123456789+-.eE", input[j]) >= 0 {
				j++
			}
			if form, ok := integerForm(input[i:j]); ok && !bytes.Equal(form, input[i:j]) {
				out = append(out, input[last:i]...)
				out = append(out, form...)
				last = j
			}
			i = j
		default:
			i++
		}
	}
	if out == nil {
		return input, false
	}
	return append(out, input[last:]...), true
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// integerForm returns the JSON number lit as an integer of at most
// maxIntDigits digits, if its value is integral and that short. It works on
// the decimal digits, so 1.0000000000000000001 is not taken for 1 as a
// float64 would.
func integerForm(lit []byte) ([]byte, bool) {
	neg, digits, exp, ok := normalNumber(lit)
	if !ok || exp < 0 {
		return nil, false
	}
	if len(digits) == 0 {
		return []byte("0"), true
	}
	if int64(len(digits))+exp > maxIntDigits {
		return nil, false
	}
	form := make([]byte, 0, 1+len(digits)+int(exp))
	if neg {
		form = append(form, '-')
	}
	form = append(form, digits...)
	form = append(form, bytes.Repeat([]byte("0"), int(exp))...)
	return form, true
}

// integralLiteral reports whether the JSON number lit has an integral
// value, however large.
func integralLiteral(lit string) bool {
	_, _, exp, ok := normalNumber([]byte(lit))
	return ok && exp >= 0
}

// normalNumber returns the JSON number lit as a sign, digits with neither
// leading nor trailing zeros (none for zero) and the power of ten they are
// multiplied by (0 for zero).
func normalNumber(lit []byte) (neg bool, digits []byte, exp int64, ok bool) {
	neg, digits, exp, ok = splitNumber(lit)
	if !ok {
		return false, nil, 0, false
	}
	digits = bytes.TrimLeft(digits, "0")
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if len(digits) == 0 {
		exp = 0
	}
	return neg, digits, exp, true
}

// splitNumber splits a JSON number into its sign, its mantissa's digits
// (integer part then fraction) and the power of ten they are multiplied
// by. An exponent beyond ±1e15 is not ok: no such number is an integer a
// Go type holds, nor a useful fraction.
func splitNumber(lit []byte) (neg bool, digits []byte, exp int64, ok bool) {
	s := lit
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	mant, expPart, hasExp := bytes.Cut(s, []byte("e"))
	if !hasExp {
		mant, expPart, hasExp = bytes.Cut(s, []byte("E"))
	}
	intPart, frac, _ := bytes.Cut(mant, []byte("."))
	digits = append(append([]byte{}, intPart...), frac...)
	if len(digits) == 0 {
		return false, nil, 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false, nil, 0, false
		}
	}
	if hasExp {
		e := expPart
		sign := int64(1)
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			if e[0] == '-' {
				sign = -1
			}
			e = e[1:]
		}
		if len(e) == 0 || len(e) > 15 {
			return false, nil, 0, false
		}
		for _, c := range e {
			if c < '0' || c > '9' {
				return false, nil, 0, false
			}
			exp = exp*10 + int64(c-'0')
		}
		exp *= sign
	}
	return neg, digits, exp - int64(len(frac)), true
}
