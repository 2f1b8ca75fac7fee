package toolrun

import anthropic "github.com/anthropics/anthropic-sdk-go/v2"

// A response can hold fallback blocks: the API's server-side fallback
// handed the turn from a model that declined to another, and the content
// before the last fallback block is the declined attempt's. The API strips
// that attempt's tool_use blocks when the response is sent back in a later
// request, so its calls are not the run's: the engine neither decides,
// runs nor answers them, and no driver shows them as pending (a
// tool_result for one would name a tool_use the API no longer has). The
// response itself goes into the history as it came, fallback blocks and
// all, as the official runner sends it back.

// fallbackSeam returns the index of the last fallback block of a
// response's content, or -1: the tool_use blocks before it are the
// declined attempt's.
func fallbackSeam(content []anthropic.BetaContentBlockUnion) int {
	seam := -1
	for i, b := range content {
		if b.Type == "fallback" {
			seam = i
		}
	}
	return seam
}

// paramFallbackSeam is fallbackSeam for the content of a message as it is
// sent back.
func paramFallbackSeam(content []anthropic.BetaContentBlockParamUnion) int {
	seam := -1
	for i, b := range content {
		if b.OfFallback != nil {
			seam = i
		}
	}
	return seam
}
