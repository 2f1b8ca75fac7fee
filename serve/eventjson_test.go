package serve

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendEventIsJSON: an event is encoded as json.Marshal encodes it,
// byte for byte, whatever its strings hold and whatever its values are.
func TestAppendEventIsJSON(t *testing.T) {
	tests := []struct {
		name string
		ev   event
	}{
		{"plain", event{"type": "TEXT_MESSAGE_START", "messageId": "r1/msg_1", "role": "assistant", "timestamp": int64(1700000000000)}},
		{"escaped", event{"type": "TEXT_MESSAGE_CONTENT", "delta": "<b>a & b</b> \"q\" \\ \n\t\r\x01 é 🙂 \u2028\u2029 \xff end"}},
		{"key order", event{"z": 1, "a": true, "type": "X", "Type": false, "_": nil, "delta": "", "é": "k"}},
		{"nested", event{"type": "RUN_FINISHED", "outcome": map[string]any{"type": "interrupt", "interrupts": []map[string]any{{"id": "int_1", "metadata": map[string]any{"input": json.RawMessage(`{"s": "<x>"}`)}}}},
			"usage": []map[string]any{{"inputTokens": int64(10), "model": "claude"}}}},
		{"other values", event{"type": "CUSTOM", "value": map[string]any{"ids": []string{"a", "<b>"}, "n": 1.5, "u": uint8(3), "raw": json.RawMessage(`[1, 2]`), "nilmap": map[string]any(nil)}, "ev": event{"k": "v"}}},
		{"many keys", func() event {
			e := event{}
			for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t"} {
				e[k] = k
			}
			return e
		}()},
		{"empty", event{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendEvent(nil, tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// FuzzAppendEventString: a string value is encoded as json.Marshal
// encodes it.
func FuzzAppendEventString(f *testing.F) {
	for _, s := range []string{"", "plain", "<&>", "\u2028", "\xff\xfe", "a\"b\\c\n"} {
		f.Add("k", s)
	}
	f.Fuzz(func(t *testing.T, k, s string) {
		ev := event{k: s, "type": "T"}
		got, err := appendEvent(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(ev)
		if !bytes.Equal(got, want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}
