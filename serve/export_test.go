package serve

import "github.com/toolrun/toolrun"

// StoreOf returns the Store h keeps its threads' states in, for the
// conformance test.
func StoreOf(h *Handler) toolrun.Store { return h.store }
