package toolrun

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolrun/toolrun/internal/schema"
)

// Tool is a client tool the model can call. The runner validates the model's
// input against InputSchema before it calls Run, so Run sees only input that
// matches the schema.
//
// Run returns the content of the tool_result sent back to the model. A
// non-nil error is sent as an is_error result with the error's text, and is
// logged. Run must honour ctx: it is cancelled when the run is cancelled or
// the call's timeout passes. A cancelled run waits for its running calls to
// return, so that no call can overlap a second run of itself on resume; a
// call that only times out is not waited for, and its late result is
// dropped and logged.
//
// Most tools are built with [NewTool] or [NewRawTool]; implement Tool
// directly to wrap something else (an MCP server, a remote service), and
// embed a [ToolConfig] in the implementation for its Config method.
type Tool interface {
	Name() string
	Description() string
	// InputSchema returns the JSON Schema of the tool's input as JSON, an
	// object schema in any draft from draft-04 to 2020-12 (see
	// [NewRawTool]). nil means {"type":"object"}. It is read once, when a
	// runner is built.
	InputSchema() json.RawMessage
	// Config returns the tool's execution settings: its timeout, approval
	// policy and the like. A runner reads it once, when it is built.
	Config() ToolConfig
	Run(ctx context.Context, input json.RawMessage) ([]Content, error)
}

// Content is one block of a tool result: text, an image, a document or a
// search result. It is the anthropic client's own type, so blocks built with
// the client work too. [Text], [Image] and [PDF] build the common ones.
type Content = anthropic.BetaToolResultBlockParamContentUnion

// Text returns a text block for a tool result.
func Text(s string) Content {
	return Content{OfText: &anthropic.BetaTextBlockParam{Text: s}}
}

// Image returns a base64 image block for a tool result. mediaType is one of
// image/jpeg, image/png, image/gif or image/webp.
func Image(mediaType string, data []byte) Content {
	return Content{OfImage: &anthropic.BetaImageBlockParam{
		Source: anthropic.BetaImageBlockParamSourceUnion{OfBase64: &anthropic.BetaBase64ImageSourceParam{
			Data:      base64.StdEncoding.EncodeToString(data),
			MediaType: anthropic.BetaBase64ImageSourceMediaType(mediaType),
		}},
	}}
}

// PDF returns a base64 PDF document block for a tool result.
func PDF(data []byte) Content {
	return Content{OfDocument: &anthropic.BetaRequestDocumentBlockParam{
		Source: anthropic.BetaRequestDocumentBlockSourceUnionParam{OfBase64: &anthropic.BetaBase64PDFSourceParam{
			Data: base64.StdEncoding.EncodeToString(data),
		}},
	}}
}

// ToolConfig holds the execution settings of one tool. The zero value means:
// the runner-wide defaults of [Options], no approval needed, may run
// concurrently with the other calls of its turn, not idempotent.
type ToolConfig struct {
	// Timeout bounds one call of the tool. Zero means Options.Timeouts.Tool;
	// a negative value means no timeout even if Options sets one. A call
	// that times out sends the model an is_error result that says so, and
	// its ctx is cancelled.
	Timeout time.Duration

	// Exclusive makes each call of the tool run alone: after the other calls
	// of its turn that come before it have finished, and before any that
	// come after it start. Use it for tools with side effects that must not
	// interleave.
	Exclusive bool

	// MaxParallel, if positive, bounds the calls of the tool that run at
	// once within a turn, under Options.MaxParallelTools: for a tool that
	// shares a rate limit or a pool, so that the run's bound can stay high
	// for the others. Zero means only the run's bound.
	MaxParallel int

	// Idempotent declares that running a call twice is harmless. A durable
	// run that resumes after a crash re-runs an interrupted call only if its
	// tool is idempotent; otherwise the model is told the call was
	// interrupted.
	Idempotent bool

	// Policy, if non-nil, decides each call of the tool before it runs, after
	// Options.Policy, as if chained after it (policy.Chain). See [Policy] and
	// [Decision].
	Policy Policy

	// MaxResultBytes bounds the text of the tool's results sent to the
	// model; see [Options.MaxResultBytes]. Zero means the runner's bound; a
	// negative value means no bound.
	MaxResultBytes int

	// Toolset, if set, makes the tool a member of a toolset: the family
	// the API names in a call's toolset_name, such as "browser" for a
	// browser_toolset_20260801 entry in Params.Tools. The runner runs the
	// tool for a call whose toolset_name is Toolset and whose name is the
	// tool's Name, and for no other call: a member's name is not reserved,
	// so a tool of its own, or a member of another toolset, may have the
	// same name, and each gets only its own calls ([ToolCall.Toolset]). A
	// call of a member the run lacks gets the unknown-tool result, as a
	// call of an unknown name does, and its tool_result carries the
	// toolset_name back as the API expects. A toolset's calls of one turn
	// run one at a time, in the model's order (see [github.com/toolrun/toolrun/driver.Batches]), as
	// its members act on one browser or screen.
	//
	// A member sends no definition of its own: the toolset's entry, which
	// the caller puts in Params.Tools, declares it to the model; the
	// runner still validates a call's input against InputSchema. Members
	// stay for the whole run: [Runner.RemoveTools] and [Runner.AddTools]
	// deal in tools of their own. "" (the default) is a tool of its own,
	// dispatched on its name.
	Toolset string
}

// Config returns c: a type that embeds a ToolConfig has the Config method
// of a [Tool].
func (c ToolConfig) Config() ToolConfig { return c }

// FuncTool is a [Tool] built from a Go function by [NewTool] or [NewRawTool].
// Set its exported [ToolConfig] fields before handing it to a runner.
type FuncTool struct {
	ToolConfig

	name        string
	description string
	schema      json.RawMessage
	run         func(ctx context.Context, input json.RawMessage) ([]Content, error)

	// The compiled schema and the definition sent to the API, made once for
	// all the runners that use the tool.
	prepOnce  sync.Once
	prepRS    *toolSchema
	prepParam anthropic.BetaToolUnionParam
	prepErr   error
}

func (t *FuncTool) prepare() (*toolSchema, anthropic.BetaToolUnionParam, error) {
	t.prepOnce.Do(func() { t.prepRS, t.prepParam, t.prepErr = compileTool(t) })
	return t.prepRS, t.prepParam, t.prepErr
}

// Name returns the tool's name.
func (t *FuncTool) Name() string { return t.name }

// Description returns the tool's description.
func (t *FuncTool) Description() string { return t.description }

// InputSchema returns the tool's input schema as JSON.
func (t *FuncTool) InputSchema() json.RawMessage { return t.schema }

// Run calls the tool's function with input.
func (t *FuncTool) Run(ctx context.Context, input json.RawMessage) ([]Content, error) {
	return t.run(ctx, input)
}

// toolNameRE is the API's rule for client tool names.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

func checkName(name string) error {
	if !toolNameRE.MatchString(name) {
		return fmt.Errorf("toolrun: tool name %q must match %s", name, toolNameRE)
	}
	return nil
}

// NewTool returns a tool that decodes the model's input into In and calls
// fn. The input schema is inferred from In by
// [github.com/google/jsonschema-go/jsonschema.For]: a struct field is
// required unless its json tag has omitempty or omitzero, and a
// `jsonschema:"..."` tag gives its description. In must be a struct, so the
// schema is an object, as the API requires.
//
// What fn returns becomes the tool_result:
//   - a string is sent as one text block (an empty string as no content);
//   - a [Content] or []Content is sent as is, for images and documents;
//   - json.RawMessage is sent as text, unchanged;
//   - any other value is marshalled to JSON and sent as text.
//
// A non-nil error is sent as an is_error result with the error's text (the
// value returned with it is ignored).
//
// NewTool panics if name is not a valid tool name, fn is nil, or no usable
// schema can be inferred from In, as [regexp.MustCompile] does for a bad pattern: In
// is a type fixed when the program is compiled, so either mistake is in
// the program and shows the first time it runs, never in one run and not
// the next. A schema that arrives as data (a file, an MCP server) goes to
// [NewRawTool], which returns an error instead.
//
// A struct tagged in the anthropic SDK's dialect
// (`jsonschema:"required,description=..."`, as toolrunner.NewBetaTool's
// tools are) gets the schema the SDK infers from it instead; see
// [NewSDKTool].
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) *FuncTool {
	if fn == nil {
		panic(fmt.Sprintf("toolrun: tool %q: nil function", name))
	}
	raw := inferSchema[In](name)
	t, err := newFuncTool(name, description, raw, func(ctx context.Context, input json.RawMessage) (Out, error) {
		var in In
		if len(input) > 0 {
			if err := decodeInput(name, input, &in); err != nil {
				var out Out
				return out, err
			}
		}
		return fn(ctx, in)
	})
	if err != nil {
		panic(err.Error())
	}
	return t
}

// inferSchema returns the input schema of a tool whose input is In, in
// the SDK's tag dialect if In uses it, and panics as NewTool does if none
// can be inferred.
func inferSchema[In any](name string) json.RawMessage {
	t := reflect.TypeFor[In]()
	sdk, err := schema.UsesSDKTags(t)
	if err != nil {
		panic(fmt.Sprintf("toolrun: tool %q: input type %s: %v", name, t, err))
	}
	if sdk {
		if t.Kind() != reflect.Struct {
			panic(fmt.Sprintf("toolrun: tool %q: input type %s must be a struct, so its schema is an object", name, t))
		}
		raw, err := schema.ForSDKTags(t)
		if err != nil {
			panic(fmt.Sprintf("toolrun: tool %q: encoding its inferred input schema: %v", name, err))
		}
		return raw
	}
	inferred, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("toolrun: inferring the input schema of tool %q: %v", name, err))
	}
	if inferred.Type != "object" {
		panic(fmt.Sprintf("toolrun: tool %q: input type %s must be a struct, so its schema is an object", name, reflect.TypeFor[In]()))
	}
	raw, err := json.Marshal(inferred)
	if err != nil {
		panic(fmt.Sprintf("toolrun: tool %q: encoding its inferred input schema: %v", name, err))
	}
	return raw
}

// NewRawTool returns a tool with an explicit JSON Schema (schemaJSON, an
// object schema in any draft from draft-04 to 2020-12; nil means
// {"type":"object"}) whose function receives the model's input as raw
// JSON, already validated against the schema. Its result is converted as
// for [NewTool].
//
// A raw schema is data (read from a file, sent by an MCP server), so
// NewRawTool checks it here, once, and never panics on it: a schema the
// runner cannot use is an error wrapping [ErrInvalidSchema] that says why
// (an integration leaves that tool out rather than offer the model a tool
// whose every call fails). An invalid name and a nil fn are errors too.
func NewRawTool[Out any](name, description string, schemaJSON []byte, fn func(ctx context.Context, input json.RawMessage) (Out, error)) (*FuncTool, error) {
	if fn == nil {
		return nil, fmt.Errorf("toolrun: tool %q: nil function", name)
	}
	return newFuncTool(name, description, json.RawMessage(bytes.Clone(schemaJSON)), fn)
}

// newFuncTool checks name and schema and builds the tool both constructors
// return, compiled once for every runner that uses it.
func newFuncTool[Out any](name, description string, schema json.RawMessage, fn func(ctx context.Context, input json.RawMessage) (Out, error)) (*FuncTool, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	t := &FuncTool{
		name:        name,
		description: description,
		schema:      schema,
		run: func(ctx context.Context, input json.RawMessage) ([]Content, error) {
			out, err := fn(ctx, input)
			if err != nil {
				return nil, err
			}
			return toContent(out)
		},
	}
	if _, _, err := t.prepare(); err != nil {
		return nil, err
	}
	return t, nil
}

// toContent converts what a tool function returned into result blocks.
func toContent(out any) ([]Content, error) {
	switch v := out.(type) {
	case string:
		if v == "" {
			return nil, nil
		}
		return []Content{Text(v)}, nil
	case Content:
		return []Content{v}, nil
	case []Content:
		return v, nil
	case json.RawMessage:
		return []Content{Text(string(v))}, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("toolrun: encoding the tool's result as JSON: %w", err)
	}
	return []Content{Text(string(b))}, nil
}

// toolParam is the tool's definition as sent in a request, from its
// input schema as JSON, already checked by compileSchema.
func toolParam(t Tool, raw json.RawMessage) (anthropic.BetaToolUnionParam, error) {
	fields := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("true")) {
		// Numbers decode as float64: the client's encoder would send a
		// json.Number as a string. The definition only informs the model;
		// validation reads the schema's numbers exactly.
		if err := json.Unmarshal(raw, &fields); err != nil {
			return anthropic.BetaToolUnionParam{}, fmt.Errorf("decoding its input schema: %w", err)
		}
	}
	// Properties is always set: the client leaves out an input_schema whose
	// fields are all empty, and the API rejects a tool without one.
	in := anthropic.BetaToolInputSchemaParam{Properties: map[string]any{}}
	for k, v := range fields {
		switch k {
		case "type", "$schema":
		case "properties":
			in.Properties = v
		case "required":
			if names, ok := v.([]any); ok {
				for _, name := range names {
					if s, ok := name.(string); ok {
						in.Required = append(in.Required, s)
					}
				}
				continue
			}
			fallthrough
		default:
			if in.ExtraFields == nil {
				in.ExtraFields = map[string]any{}
			}
			in.ExtraFields[k] = v
		}
	}
	p := anthropic.BetaToolParam{Name: t.Name(), InputSchema: in}
	if d := t.Description(); d != "" {
		p.Description = anthropic.String(d)
	}
	return anthropic.BetaToolUnionParam{OfTool: &p}, nil
}
