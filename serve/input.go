package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
)

// ProtocolVersion is the AG-UI protocol version the server speaks, as
// RUN_STARTED.protocolVersion declares it to a client that declares the
// same or a newer one (or one the server cannot read). A client that
// declares 1.0 is answered as a 1.0 producer would ("1.0", no
// encryptedValueType); one that declares none (@ag-ui/client before
// 1.0, CopilotKit's pinned 0.0.x) gets a 1.0 stream with nothing its
// stricter schemas refuse: no pendingToolCallIds on a success outcome,
// which such a client derives from the stream instead.
const ProtocolVersion = "1.1"

// peer is what the server knows of the client of a run: the protocol
// version it declared, and what the server must leave out for it.
type peer struct {
	// declared is RunAgentInput.protocolVersion as sent, "" if absent.
	declared string
	// speaks is the version the run's stream speaks, as RUN_STARTED
	// declares it.
	speaks string
	// legacy is a client that declared no version: a success outcome
	// carries no pendingToolCallIds for it (its schema is closed).
	legacy bool
}

// negotiate returns the peer of a client that declared v, and a warning
// for a declaration the server cannot read or a newer one than its own:
// the run is served either way, as the spec asks (versioning.mdx,
// "Version negotiation": a newer minor MUST be served, and SHOULD be
// warned about).
func negotiate(v string) (peer, string) {
	if v == "" {
		return peer{speaks: "1.0", legacy: true}, ""
	}
	maj, min, ok := parseVersion(v)
	switch {
	case !ok:
		return peer{declared: v, speaks: ProtocolVersion}, fmt.Sprintf("protocolVersion %q is not a MAJOR.MINOR version this server can read; it speaks %s and serves the run as it", v, ProtocolVersion)
	case maj == 1 && min == 0:
		return peer{declared: v, speaks: "1.0"}, ""
	case maj == 1 && min == 1:
		return peer{declared: v, speaks: ProtocolVersion}, ""
	default:
		return peer{declared: v, speaks: ProtocolVersion}, fmt.Sprintf("protocolVersion %q is newer than the %s this server speaks; the run is served as %s", v, ProtocolVersion, ProtocolVersion)
	}
}

func parseVersion(v string) (int, int, bool) {
	a, b, ok := strings.Cut(v, ".")
	if !ok {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(a)
	min, err2 := strconv.Atoi(b)
	return maj, min, err1 == nil && err2 == nil && maj >= 0 && min >= 0
}

// inputKeys are the members of a RunAgentInput the schema describes; any
// other is stripped, with a warning.
var inputKeys = map[string]bool{"threadId": true, "runId": true, "protocolVersion": true, "parentRunId": true, "state": true, "messages": true, "tools": true, "context": true, "forwardedProps": true, "resume": true}

// badInput is the refusal of a malformed RunAgentInput: 400 bad_input,
// before anything is recorded or run (run-input.mdx, "Error Handling").
func badInput(format string, args ...any) error {
	return refuse(http.StatusBadRequest, "bad_input", format, args...)
}

// checkAGUIInput checks a RunAgentInput against the AG-UI schema, read the
// one way it can be read (see [Handler.readInput]): top holds its members
// but messages, msgs its messages, already read. Values the schema
// rejects are refused (null state or forwardedProps, no messages, a tool
// with no description, a context entry with no value, a number where a
// string belongs, an assistant's tool call without its function). Members
// the schema does not describe are stripped and named in warnings, as are
// content parts and messages the server cannot use.
func checkAGUIInput(top map[string]json.RawMessage, msgs []message, hasMessages bool) (*runInput, []string, error) {
	var warnings []string
	for k := range top {
		if !inputKeys[k] {
			warnings = append(warnings, fmt.Sprintf("the input member %q is not AG-UI's; it was ignored", k))
		}
	}
	for _, k := range []string{"state", "forwardedProps"} {
		if v, ok := top[k]; ok && isNull(v) {
			return nil, nil, badInput("%s is null; leave it out for none", k)
		}
	}
	if !hasMessages {
		return nil, nil, badInput("messages is required: the conversation as the client has it ([] for none)")
	}
	for _, k := range []string{"tools", "context", "resume"} {
		if v, ok := top[k]; ok && isNull(v) {
			return nil, nil, badInput("%s is null; leave it out, or send [], for none", k)
		}
	}
	b, err := json.Marshal(top)
	if err != nil {
		return nil, nil, badInput("the body is not a RunAgentInput: %v", err)
	}
	var in runInput
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, nil, badInput("the body is not a RunAgentInput: %v", err)
	}
	// The same body again, for what is there and what is not: the
	// members the schema requires of tools, context and resume entries.
	var has struct {
		Tools []struct {
			Name        *string         `json:"name"`
			Description *string         `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"tools"`
		Context []struct {
			Description *string `json:"description"`
			Value       *string `json:"value"`
		} `json:"context"`
		Resume []struct {
			InterruptID *string         `json:"interruptId"`
			Status      string          `json:"status"`
			Payload     json.RawMessage `json:"payload"`
		} `json:"resume"`
	}
	if err := json.Unmarshal(b, &has); err != nil {
		return nil, nil, badInput("the body is not a RunAgentInput: %v", err)
	}
	for i, t := range has.Tools {
		switch {
		case t.Name == nil:
			return nil, nil, refuse(http.StatusBadRequest, "bad_tool", "tools[%d] has no name", i)
		case t.Description == nil:
			return nil, nil, refuse(http.StatusBadRequest, "bad_tool", "tool %q has no description; the schema requires one (it may be \"\")", *t.Name)
		case len(t.Parameters) > 0 && isNull(t.Parameters):
			return nil, nil, refuse(http.StatusBadRequest, "bad_tool", "tool %q: parameters is null; leave it out for none", *t.Name)
		}
	}
	for i, c := range has.Context {
		if c.Description == nil || c.Value == nil {
			return nil, nil, badInput("context[%d] needs a description and a value, both strings", i)
		}
	}
	for i, re := range has.Resume {
		switch {
		case re.InterruptID == nil:
			return nil, nil, refuse(http.StatusBadRequest, "bad_resume", "resume[%d] has no interruptId", i)
		case re.Status != "resolved" && re.Status != "cancelled":
			return nil, nil, refuse(http.StatusBadRequest, "bad_resume", "interrupt %q: status %q; want resolved or cancelled", *re.InterruptID, re.Status)
		case len(re.Payload) > 0 && isNull(re.Payload):
			return nil, nil, refuse(http.StatusBadRequest, "bad_resume", "interrupt %q: the payload is null; leave it out for none", *re.InterruptID)
		}
	}
	in.Messages = msgs
	kept := in.Messages[:0]
	for i, m := range in.Messages {
		w, keep, err := checkMessage(i, &m)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
		if keep {
			kept = append(kept, m)
		}
	}
	in.Messages = kept
	return &in, warnings, nil
}

func isNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

// checkMessage checks one message against its role's schema, and says
// whether the server takes it: an activity message (the client's own
// rendering, which a client must not send back) and one of a role AG-UI
// does not have are left out, with a warning.
func checkMessage(i int, m *message) ([]string, bool, error) {
	bad := func(format string, args ...any) error {
		return refuse(http.StatusBadRequest, "bad_message", "messages[%d]: "+format, append([]any{i}, args...)...)
	}
	if m.ID == "" {
		return nil, false, bad("a message has no id")
	}
	switch m.Role {
	case "user", "tool":
		if len(m.Content) == 0 || isNull(m.Content) {
			return nil, false, bad("message %q (%s) has no content", m.ID, m.Role)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, false, refuse(http.StatusBadRequest, "bad_result", "tool message %q has no toolCallId", m.ID)
		}
	case "system", "developer":
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return nil, false, bad("message %q (%s): content must be a string", m.ID, m.Role)
		}
	case "assistant":
		if len(m.Content) > 0 && !isNull(m.Content) {
			var s string
			if err := json.Unmarshal(m.Content, &s); err != nil {
				return nil, false, bad("message %q (assistant): content must be a string", m.ID)
			}
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Type != "function" || tc.Function == nil || tc.Function.Name == nil || tc.Function.Arguments == nil {
				return nil, false, bad("message %q (assistant): toolCalls[%d] needs an id, type \"function\" and a function with a name and arguments (a string)", m.ID, j)
			}
		}
	case "reasoning":
		// The client's copy of the model's thinking: the server has its
		// own, with its signature, in the thread.
	case "activity":
		return []string{fmt.Sprintf("message %q is an activity message, which a client keeps to itself; it was ignored", m.ID)}, false, nil
	case "":
		return nil, false, bad("message %q has no role", m.ID)
	default:
		return []string{fmt.Sprintf("message %q has the role %q, which AG-UI does not have; it was ignored", m.ID, m.Role)}, false, nil
	}
	return nil, true, nil
}

// oneReading refuses JSON that could be read two ways: an object, at any
// depth, whose keys are not each there once, or a value followed by
// more. encoding/json keeps the last of a key given twice and ignores
// what follows the first value. path names b's place in the input, for
// the error.
func oneReading(b []byte, path string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := walkValue(dec, path); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

func walkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("the key %q is given twice in %s", key, path)
			}
			seen[key] = true
			if err := walkValue(dec, path+"."+key); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	return nil
}

// contentPart is one AG-UI content part, of any type.
type contentPart struct {
	Type   string      `json:"type"`
	Text   *string     `json:"text"`
	Source *partSource `json:"source"`
	// The retired "binary" part of @ag-ui/core before 1.0, translated
	// into an image or document part (versioning.mdx, "Retired shapes").
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
	URL      string `json:"url"`
	FileID   string `json:"id"`
}

// partSource is where a media part's bytes are.
type partSource struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType"`
	Provider string `json:"provider"`
}

// blocks returns a message's content as Claude's content blocks: a string
// is one text block; of an array of parts, text, image and document
// parts become text, image and document blocks, and a part Claude cannot
// read (audio, video, a type AG-UI does not have, another provider's
// file) is skipped with a warning, never a refused run
// (run-input.mdx, "messages"). An empty content is one empty text block.
func (m message) blocks() ([]toolrun.Content, []string, error) {
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return []toolrun.Content{toolrun.Text(s)}, nil, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(m.Content, &raw); err != nil {
		return nil, nil, fmt.Errorf("message %q: content is neither a string nor an array of parts", m.ID)
	}
	var out []toolrun.Content
	var warnings []string
	skip := func(j int, why string) {
		warnings = append(warnings, fmt.Sprintf("message %q: content part %d was skipped: %s", m.ID, j, why))
	}
	for j, r := range raw {
		var p contentPart
		if err := json.Unmarshal(r, &p); err != nil {
			return nil, nil, fmt.Errorf("message %q: content part %d is not a content part: %v", m.ID, j, err)
		}
		if p.Type == "binary" {
			p = fromBinary(p)
		}
		switch p.Type {
		case "text":
			if p.Text == nil {
				return nil, nil, fmt.Errorf("message %q: text part %d has no text", m.ID, j)
			}
			out = append(out, toolrun.Text(*p.Text))
		case "image", "document":
			if p.Source == nil || p.Source.Type == "" || p.Source.Value == "" && p.Source.Type != "data" {
				return nil, nil, fmt.Errorf("message %q: %s part %d has no source", m.ID, p.Type, j)
			}
			c, why := media(p)
			if why != "" {
				skip(j, why)
				continue
			}
			out = append(out, c)
		case "audio", "video":
			skip(j, "Claude does not read "+p.Type)
		case "":
			return nil, nil, fmt.Errorf("message %q: content part %d has no type", m.ID, j)
		default:
			skip(j, fmt.Sprintf("the part type %q is not AG-UI's", p.Type))
		}
	}
	if len(out) == 0 {
		out = append(out, toolrun.Text(""))
	}
	return out, warnings, nil
}

// fromBinary translates a retired binary part into an image or document
// part.
func fromBinary(p contentPart) contentPart {
	typ := "document"
	if strings.HasPrefix(p.MimeType, "image/") {
		typ = "image"
	}
	src := &partSource{MimeType: p.MimeType}
	switch {
	case p.Data != "":
		src.Type, src.Value = "data", p.Data
	case p.URL != "":
		src.Type, src.Value = "url", p.URL
	case p.FileID != "":
		src.Type, src.Value = "file", p.FileID
	}
	return contentPart{Type: typ, Source: src}
}

// media returns an image or document part as Claude's block, or why it
// cannot be one.
func media(p contentPart) (toolrun.Content, string) {
	src := p.Source
	if src.Type == "file" && src.Provider != "" && src.Provider != "anthropic" {
		return toolrun.Content{}, fmt.Sprintf("a file handle of the provider %q, which Claude cannot resolve", src.Provider)
	}
	if p.Type == "image" {
		var s anthropic.BetaImageBlockParamSourceUnion
		switch src.Type {
		case "data":
			switch src.MimeType {
			case "image/jpeg", "image/png", "image/gif", "image/webp":
			default:
				return toolrun.Content{}, fmt.Sprintf("an image of type %q; Claude reads JPEG, PNG, GIF and WebP", src.MimeType)
			}
			if _, err := base64.StdEncoding.DecodeString(src.Value); err != nil {
				return toolrun.Content{}, "its data is not base64"
			}
			s.OfBase64 = &anthropic.BetaBase64ImageSourceParam{Data: src.Value, MediaType: anthropic.BetaBase64ImageSourceMediaType(src.MimeType)}
		case "url":
			s.OfURL = &anthropic.BetaURLImageSourceParam{URL: src.Value}
		case "file":
			s.OfFile = &anthropic.BetaFileImageSourceParam{FileID: src.Value}
		default:
			return toolrun.Content{}, fmt.Sprintf("the source type %q is not AG-UI's", src.Type)
		}
		return toolrun.Content{OfImage: &anthropic.BetaImageBlockParam{Source: s}}, ""
	}
	var s anthropic.BetaRequestDocumentBlockSourceUnionParam
	switch src.Type {
	case "data":
		data, err := base64.StdEncoding.DecodeString(src.Value)
		if err != nil {
			return toolrun.Content{}, "its data is not base64"
		}
		switch {
		case src.MimeType == "application/pdf":
			s.OfBase64 = &anthropic.BetaBase64PDFSourceParam{Data: src.Value}
		case strings.HasPrefix(src.MimeType, "text/"):
			s.OfText = &anthropic.BetaPlainTextSourceParam{Data: string(data)}
		default:
			return toolrun.Content{}, fmt.Sprintf("a document of type %q; Claude reads PDF and plain text", src.MimeType)
		}
	case "url":
		s.OfURL = &anthropic.BetaURLPDFSourceParam{URL: src.Value}
	case "file":
		s.OfFile = &anthropic.BetaFileDocumentSourceParam{FileID: src.Value}
	default:
		return toolrun.Content{}, fmt.Sprintf("the source type %q is not AG-UI's", src.Type)
	}
	return toolrun.Content{OfDocument: &anthropic.BetaRequestDocumentBlockParam{Source: s}}, ""
}

// userBlocks returns tool-result content as the blocks of a user message.
func userBlocks(cs []toolrun.Content) []anthropic.BetaContentBlockParamUnion {
	out := make([]anthropic.BetaContentBlockParamUnion, 0, len(cs))
	for _, c := range cs {
		switch {
		case c.OfText != nil:
			out = append(out, anthropic.BetaContentBlockParamUnion{OfText: c.OfText})
		case c.OfImage != nil:
			out = append(out, anthropic.BetaContentBlockParamUnion{OfImage: c.OfImage})
		case c.OfDocument != nil:
			out = append(out, anthropic.BetaContentBlockParamUnion{OfDocument: c.OfDocument})
		}
	}
	return out
}

// textOf returns the text of blocks, for the places where only text goes
// (a system message's instructions, a digest).
func textOf(cs []toolrun.Content) string {
	var b strings.Builder
	for _, c := range cs {
		if c.OfText != nil {
			b.WriteString(c.OfText.Text)
		}
	}
	return b.String()
}
