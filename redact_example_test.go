package toolrun_test

import (
	"fmt"

	"github.com/toolrun/toolrun"
)

// Redact takes credentials out of a message before it goes anywhere the
// runner's log would not have shown it.
func ExampleRedact() {
	fmt.Println(toolrun.Redact(`fetch failed: Authorization: Bearer abcdefghijklmnop1234`))
	// Output:
	// fetch failed: Authorization: Bearer [REDACTED]
}
