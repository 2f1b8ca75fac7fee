package toolrun

// SetResult records res as the result of the pending call toolUseID in the
// runner's state, as driver.SetResult does on a State: for a call that ran
// on another runner (each call of a turn run in parallel on a runner
// resumed from the State, or in another process), so that this runner,
// which holds the run, sends the result with its next request without
// being resumed again. Like [Runner.Decide], it calls no hook and emits no
// event: the runner that ran the call did. It is an error if the pending
// turn has no such call or the call has a result already.
func (r *Runner) SetResult(toolUseID string, res *ToolResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.setResult(toolUseID, res)
}
