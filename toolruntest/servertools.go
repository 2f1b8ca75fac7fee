package toolruntest

import "encoding/json"

// streamedInput returns how a raw block whose input the API streams (a
// server_tool_use or mcp_tool_use, as [ServerToolUse] makes) starts in a
// stream: its content_block_start carries the block with the input {}, and
// input, the block's input, follows in input_json_delta events, as the
// API streams a tool_use. ok is false for any other block, which starts
// whole.
func streamedInput(b Block) (start json.RawMessage, input string, ok bool) {
	if b.Raw == nil || (b.Type != "server_tool_use" && b.Type != "mcp_tool_use") {
		return nil, "", false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b.Raw, &fields); err != nil || fields["input"] == nil {
		return nil, "", false
	}
	input = string(fields["input"])
	fields["input"] = json.RawMessage("{}")
	return mustMarshal(fields), input, true
}
