package deepcopy_test

import (
	"encoding/json"
	"math"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/internal/deepcopy"
)

// node is a value that can point to itself.
type node struct {
	Name string
	Next *node
	Any  any
}

// withHidden has an unexported field, which is copied by value.
type withHidden struct {
	Shown  []int
	hidden int
}

func TestCopyPointerCycle(t *testing.T) {
	a := &node{Name: "a"}
	b := &node{Name: "b", Next: a}
	a.Next = b
	a.Any = a // a cycle through an interface too

	c := deepcopy.Copy(a)
	if c == a || c.Next == b {
		t.Fatalf("got the original's pointers back: %p %p, want new ones", c, c.Next)
	}
	if c.Next.Next != c {
		t.Errorf("got c.Next.Next = %p, want the copy itself %p: the cycle is not kept", c.Next.Next, c)
	}
	if got, _ := c.Any.(*node); got != c {
		t.Errorf("got c.Any = %p, want the copy itself %p", got, c)
	}
	c.Next.Name = "changed"
	if b.Name != "b" {
		t.Errorf("got b.Name %q after writing the copy, want %q", b.Name, "b")
	}
}

func TestCopyCycleThroughMapAndSlice(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	s := []any{nil}
	s[0] = s

	cm := deepcopy.Copy(m)
	if got, _ := cm["self"].(map[string]any); len(got) != 1 {
		t.Fatalf("got cm[self] = %v, want the copy itself", cm["self"])
	}
	cm["new"] = 1
	if _, ok := m["new"]; ok {
		t.Error("a key added to the copy is in the original map")
	}
	if got := cm["self"].(map[string]any); len(got) != 2 {
		t.Errorf("got %d keys through cm[self], want 2: the copy's cycle points elsewhere", len(got))
	}

	cs := deepcopy.Copy(s)
	cs[0].([]any)[0] = "x"
	if _, ok := s[0].([]any); !ok {
		t.Errorf("got s[0] = %v after writing the copy, want the original slice", s[0])
	}
	if cs[0] != "x" {
		t.Errorf("got cs[0] = %v, want x: the copy's cycle points elsewhere", cs[0])
	}
}

func TestCopyNil(t *testing.T) {
	tests := []struct {
		name string
		in   any
	}{
		{"nil interface", nil},
		{"nil pointer", (*node)(nil)},
		{"nil slice", []byte(nil)},
		{"nil map", map[string][]int(nil)},
		{"struct of nils", node{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deepcopy.Copy(tt.in)
			if diff := cmp.Diff(tt.in, got, cmp.AllowUnexported(node{})); diff != "" {
				t.Errorf("Copy(%#v) (-in +got):\n%s", tt.in, diff)
			}
			if tt.in != nil && got == nil {
				t.Errorf("got a nil interface, want %T", tt.in)
			}
		})
	}
	var err error
	if got := deepcopy.Copy(err); got != nil {
		t.Errorf("got %v, want a nil error", got)
	}
	if got := deepcopy.Copy([]string{}); got == nil {
		t.Error("got nil for an empty slice, want an empty one")
	}
	if got := deepcopy.Copy(map[string]int{}); got == nil {
		t.Error("got nil for an empty map, want an empty one")
	}
}

func TestCopyMapOfSlices(t *testing.T) {
	m := map[string][]string{"a": {"1", "2"}, "b": nil}
	c := deepcopy.Copy(m)
	if diff := cmp.Diff(m, c); diff != "" {
		t.Fatalf("copy differs (-want +got):\n%s", diff)
	}
	if c["b"] != nil {
		t.Errorf("got %#v for a nil slice, want nil", c["b"])
	}
	c["a"][0] = "changed"
	c["a"] = append(c["a"], "3")
	if got := m["a"]; got[0] != "1" || len(got) != 2 {
		t.Errorf("got m[a] = %v after writing the copy, want [1 2]", got)
	}
}

func TestCopyRawMessageBytes(t *testing.T) {
	type call struct {
		Input json.RawMessage
		Any   any
	}
	in := call{Input: json.RawMessage(`{"path":`), Any: json.RawMessage(`{"x":1}`)}
	c := deepcopy.Copy(in)
	c.Input[2] = 'X'
	c.Any.(json.RawMessage)[2] = 'X'
	if string(in.Input) != `{"path":` {
		t.Errorf("got %s after writing the copy, want the input unchanged", in.Input)
	}
	if got := string(in.Any.(json.RawMessage)); got != `{"x":1}` {
		t.Errorf("got %s after writing the copy, want the input unchanged", got)
	}
}

func TestCopyValuesJSONRefuses(t *testing.T) {
	ch := make(chan int)
	f := func() int { return 7 }
	in := map[string]any{"inf": math.Inf(1), "ch": ch, "f": f, "tags": []string{"a"}}
	c := deepcopy.Copy(in)
	if got := c["inf"].(float64); !math.IsInf(got, 1) {
		t.Errorf("got %v, want +Inf", got)
	}
	if c["ch"].(chan int) != ch {
		t.Error("got another channel, want the same one: a channel has no contents to copy")
	}
	if got := c["f"].(func() int)(); got != 7 {
		t.Errorf("got %d from the copied func, want 7", got)
	}
	c["tags"].([]string)[0] = "changed"
	if got := in["tags"].([]string)[0]; got != "a" {
		t.Errorf("got %q after writing the copy, want a", got)
	}
}

func TestCopyStructUnexportedByValue(t *testing.T) {
	in := [2]withHidden{{Shown: []int{1}, hidden: 5}, {hidden: 6}}
	c := deepcopy.Copy(in)
	if c[0].hidden != 5 || c[1].hidden != 6 {
		t.Errorf("got hidden %d, %d, want 5, 6", c[0].hidden, c[1].hidden)
	}
	c[0].Shown[0] = 9
	if in[0].Shown[0] != 1 {
		t.Errorf("got %d after writing the copy, want 1", in[0].Shown[0])
	}
}

// TestCopySharedPointerKept: two fields that point to one value in the
// original point to one value in the copy.
func TestCopySharedPointerKept(t *testing.T) {
	shared := &node{Name: "s"}
	in := []*node{shared, shared}
	c := deepcopy.Copy(in)
	if c[0] != c[1] || c[0] == shared {
		t.Errorf("got %p, %p (original %p), want one new pointer twice", c[0], c[1], shared)
	}
}

// TestCopySDKParams copies the anthropic SDK's param types: unions,
// param.Opt and a param struct's extra fields, which ExtraFields hands out
// as they are.
func TestCopySDKParams(t *testing.T) {
	text := anthropic.BetaTextBlockParam{Text: "hello"}
	text.SetExtraFields(map[string]any{"tags": []string{"a"}})
	in := anthropic.BetaMessageParam{OfAssistant: &anthropic.BetaAssistantMessageParam{Content: []anthropic.BetaContentBlockParamUnion{
		{OfText: &text},
		{OfToolUse: &anthropic.BetaToolUseBlockParam{ID: "x1", Name: "t", Input: map[string]any{"n": math.NaN()}}},
	}}}
	in.OfAssistant.Content[0].OfText.Citations = []anthropic.BetaTextCitationParamUnion{}

	c := deepcopy.Copy(in)
	wantJSON, _ := json.Marshal(in.OfAssistant.Content[0])
	gotJSON, _ := json.Marshal(c.OfAssistant.Content[0])
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("got %s, want %s", gotJSON, wantJSON)
	}
	if c.OfAssistant == in.OfAssistant || c.OfAssistant.Content[0].OfText == &text {
		t.Fatal("got the original's pointers in the copy")
	}
	c.OfAssistant.Content[0].OfText.Text = "forged"
	c.OfAssistant.Content[0].OfText.ExtraFields()["tags"].([]string)[0] = "forged"
	c.OfAssistant.Content[0].OfText.ExtraFields()["new"] = 1
	c.OfAssistant.Content[1].OfToolUse.Input.(map[string]any)["n"] = 1
	if text.Text != "hello" {
		t.Errorf("got text %q after writing the copy, want hello", text.Text)
	}
	if diff := cmp.Diff(map[string]any{"tags": []string{"a"}}, text.ExtraFields()); diff != "" {
		t.Errorf("the original's extra fields changed through the copy (-want +got):\n%s", diff)
	}
	if n := in.OfAssistant.Content[1].OfToolUse.Input.(map[string]any)["n"].(float64); !math.IsNaN(n) {
		t.Errorf("got input n = %v after writing the copy, want NaN", n)
	}
}
