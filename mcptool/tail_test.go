package mcptool

import (
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	big := strings.Repeat("x", tailSize-10)
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{name: "nothing", want: ""},
		{name: "lines", writes: []string{"one\n", "two\n"}, want: "one\ntwo"},
		{name: "partial line", writes: []string{"one\ntw", "o"}, want: "one\ntwo"},
		// 3 bytes too many: "fir" is dropped, then the rest of its line.
		{name: "front dropped at a line start", writes: []string{"first\nsecond\n", big}, want: "…second\n" + big},
		{name: "one write too big", writes: []string{"head\n" + big + big + "\nend\n"}, want: "…end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tl tail
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(w))
				}
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("String() = %.40q…, want %.40q…", got, tt.want)
			}
			if len(tl.buf) > tailSize {
				t.Errorf("kept %d bytes, want at most %d", len(tl.buf), tailSize)
			}
		})
	}
	if got := (*tail)(nil).String(); got != "" {
		t.Errorf("nil tail: String() = %q, want empty", got)
	}
}
