package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits on a number, in a schema or an input. Within them every number is
// compared exactly, and each comparison (minimum, maximum, multipleOf,
// const, enum, uniqueItems) costs microseconds; a number past them is
// refused with a message saying so, before any keyword is applied.
const (
	// MaxNumberDigits bounds the digits written before the exponent,
	// leading and trailing zeros included.
	MaxNumberDigits = 1000
	// MaxNumberExponent bounds the exponent as written (the n of 1en),
	// either way.
	MaxNumberExponent = 1000
)

// errNumberLimits is the reason a number breaks the limits.
var errNumberLimits = fmt.Errorf("a number of at most %d digits with an exponent between -%d and %d", MaxNumberDigits, MaxNumberExponent, MaxNumberExponent)

// errNumberRange is the reason an input number cannot be sent back in the
// conversation history, which holds numbers as 64-bit floats.
var errNumberRange = errors.New("a number between -1.7976931348623157e308 and 1.7976931348623157e308 (the largest a 64-bit float holds)")

// checkNumber reports whether n, a number as JSON writes it, is within
// MaxNumberDigits and MaxNumberExponent. It reads the text once and never
// converts it.
func checkNumber(n json.Number) error {
	s := string(n)
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	digits := 0
	for i := 0; i < len(mant); i++ {
		if c := mant[i]; c >= '0' && c <= '9' {
			digits++
		}
	}
	if digits > MaxNumberDigits {
		return errNumberLimits
	}
	if hasExp {
		exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(exp) > len(strconv.Itoa(MaxNumberExponent)) {
			return errNumberLimits
		}
		if e, err := strconv.Atoi(exp); exp != "" && (err != nil || e > MaxNumberExponent) {
			return errNumberLimits
		}
	}
	return nil
}

// checkFloat reports whether n, within the limits of checkNumber, is
// within the range of a float64, as the conversation history needs.
func checkFloat(n json.Number) error {
	if _, err := strconv.ParseFloat(string(n), 64); err != nil {
		if ne, ok := errors.AsType[*strconv.NumError](err); ok && errors.Is(ne.Err, strconv.ErrRange) {
			// Underflow parses as 0 without an error; only overflow
			// is refused.
			return errNumberRange
		}
	}
	return nil
}

// badNumber is a number of a decoded text that breaks a limit.
type badNumber struct {
	pointer string
	value   json.Number
	err     error // errNumberLimits or errNumberRange
}

// checkDecoded returns, for the number n at path, a badNumber or nil. The
// float range is checked only where the text could exceed it (an exponent,
// or more than 308 digits), so a plain number costs one scan.
func checkDecoded(n json.Number, path []string) *badNumber {
	err := checkNumber(n)
	if err == nil && (len(n) > 308 || strings.ContainsAny(string(n), "eE")) {
		err = checkFloat(n)
	}
	if err == nil {
		return nil
	}
	return &badNumber{pointer: pointer(path), value: n, err: err}
}

// numberViolations lists the numbers of d that break the limits, and for
// a tool input (float) those beyond a float64.
func numberViolations(d *decoded, float bool) []Violation {
	var out []Violation
	for _, n := range d.numbers {
		if n.err == errNumberRange && !float {
			continue
		}
		out = append(out, Violation{Pointer: n.pointer, Expected: n.err.Error(), Got: describeValue(n.value)})
	}
	return out
}

// displayPointer renders a JSON Pointer for an error text, "(root)" for
// the root.
func displayPointer(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}
