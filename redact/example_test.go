package redact_test

import (
	"fmt"

	"github.com/toolrun/toolrun/redact"
)

// String takes credentials out of a message before it goes anywhere the
// runner's log would not have shown it.
func ExampleString() {
	fmt.Println(redact.String(`fetch failed: Authorization: Bearer abcdefghijklmnop1234`))
	// Output:
	// fetch failed: Authorization: Bearer [REDACTED]
}
