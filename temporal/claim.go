package temporal

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// BlobStore is a store of bytes under keys, which the claim check keeps
// the large values of a run in (see [RunOptions.ClaimThreshold]):
// [github.com/toolrun/toolrun/filestore.Store] and sqlitestore's Store implement it. A worker uses
// it when its [toolrun.Options.Store] implements it too, and a client
// when it is given one with [ClientOptions].Store.
//
// It is an interface of its own, not a kind of [toolrun.Store], because a
// Store keeps States with compare-and-swap versions for a runner that
// resumes, and a claim is plain bytes written once, read by whichever
// worker takes the next step and deleted when no step reads it again; a
// claim saved as a State would carry a State's encoding and versions for
// nothing. Implement it next to your own Store when you have one.
type BlobStore interface {
	// PutBlob saves b under key, replacing what was there, atomically:
	// a reader sees the old bytes or the new ones, never part of them.
	PutBlob(ctx context.Context, key string, b []byte) error
	// GetBlob returns the bytes saved under key, or an error wrapping
	// [fs.ErrNotExist] if there are none.
	GetBlob(ctx context.Context, key string) ([]byte, error)
	// DeleteBlob removes the bytes under key; it is not an error if there
	// are none.
	DeleteBlob(ctx context.Context, key string) error
}

// DefaultClaimThreshold is the default of [RunOptions.ClaimThreshold] and
// of [ClientOptions].ClaimThreshold: a value whose JSON is larger than this travels
// through the Store, not through the workflow's history.
const DefaultClaimThreshold = 16 << 10

// ErrClaimMissing is why a run stops when a value it keeps in the Store
// (see [RunOptions.ClaimThreshold]) is not there: deleted by hand, or a
// worker whose Store keeps no blobs. The run ends with an [Outcome] whose
// StopReason is [toolrun.StopError] and whose Detail says which value,
// and the call or step that needed it is not run.
var ErrClaimMissing = errors.New("toolrun: a value the run keeps in the Store is missing")

// claimMark starts the text that stands for a value in the Store: a NUL,
// which neither a model nor a person types, then the key.
const claimMark = "\x00toolrun-claim:"

// claimKeyPrefix returns the prefix of the keys of the claims of workflow
// id: the workers and the clients write only such keys, and read and
// delete only those of the run at hand, so a value that looks like a claim
// of another run is left as it is.
func claimKeyPrefix(workflowID string) string { return workflowID + "/claim-" }

// thresholdOf returns the claim threshold that option n (of
// [RunOptions.ClaimThreshold] or a [ClientOptions]) means: 0 for none.
func thresholdOf(n int) int {
	switch {
	case n == 0:
		return DefaultClaimThreshold
	case n < 0:
		return 0
	}
	return n
}

// claimField is the shape of a value the claim check may keep in the
// Store, which says the shape of what stands for it.
type claimField int

const (
	// fieldValue is any JSON (an input) or a JSON string (a reason): a
	// JSON string stands for it.
	fieldValue claimField = iota
	// fieldResult is a call's result as a State keeps it (the JSON of a
	// [toolrun.ToolResult]): a result of one text block stands for it.
	fieldResult
	// fieldContent is a list of content blocks (a Skip's result): a list
	// of one text block stands for it.
	fieldContent
)

// markText returns the text that stands for the value under key.
func markText(key string) string { return claimMark + key }

// markJSON returns the JSON that stands, in a field of shape f, for the
// value under key.
func markJSON(f claimField, key string) json.RawMessage {
	text := markText(key)
	var v any = text
	switch f {
	case fieldResult:
		v = map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}}
	case fieldContent:
		v = []any{map[string]string{"type": "text", "text": text}}
	}
	b, _ := json.Marshal(v) // strings and maps of strings always encode
	return b
}

// markKey returns the key that raw, a field of shape f, stands for, if it
// is a claim's mark.
func markKey(f claimField, raw json.RawMessage) (string, bool) {
	if len(raw) > 4096 || !bytes.Contains(raw, []byte("toolrun-claim:")) {
		return "", false
	}
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var text string
	switch f {
	case fieldValue:
		if json.Unmarshal(raw, &text) != nil {
			return "", false
		}
	case fieldResult:
		var r struct {
			Content []block `json:"content"`
		}
		if json.Unmarshal(raw, &r) != nil || len(r.Content) != 1 || r.Content[0].Type != "text" {
			return "", false
		}
		text = r.Content[0].Text
	case fieldContent:
		var c []block
		if json.Unmarshal(raw, &c) != nil || len(c) != 1 || c[0].Type != "text" {
			return "", false
		}
		text = c[0].Text
	}
	key, ok := strings.CutPrefix(text, claimMark)
	return key, ok && key != ""
}

// rewriteCalls calls f on each value of the calls of s's turn in progress
// that the claim check may keep in the Store, and returns s with what f
// returned in their place, or s itself if f changed nothing. The values
// are a call's decision (its edited input, its reason, a Skip's result)
// and its result, which is where a person's decision and a tool's answer
// sit in the State a workflow holds; the State's JSON is the format it is
// stored in, and the only way to reach them without a Runner. s is not
// changed.
func rewriteCalls(s *toolrun.State, f func(claimField, json.RawMessage) (json.RawMessage, error)) (*toolrun.State, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("toolrun: encoding the state: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	var pending map[string]json.RawMessage
	if raw, ok := top["pending"]; !ok || json.Unmarshal(raw, &pending) != nil || pending == nil {
		return s, nil
	}
	var calls []map[string]json.RawMessage
	if err := json.Unmarshal(pending["calls"], &calls); err != nil {
		return s, nil
	}
	changed := false
	// apply replaces field of obj with what f returns, and reports
	// whether that changed it.
	apply := func(obj map[string]json.RawMessage, field string, shape claimField) (bool, error) {
		raw, ok := obj[field]
		if !ok || len(raw) == 0 || string(raw) == "null" {
			return false, nil
		}
		out, err := f(shape, raw)
		if err != nil || bytes.Equal(out, raw) {
			return false, err
		}
		obj[field] = out
		return true, nil
	}
	for _, c := range calls {
		var d map[string]json.RawMessage
		if raw, ok := c["decision"]; ok && json.Unmarshal(raw, &d) == nil && d != nil {
			dchanged := false
			for _, fl := range []struct {
				name  string
				shape claimField
			}{{"input", fieldValue}, {"reason", fieldValue}, {"result", fieldContent}} {
				ch, err := apply(d, fl.name, fl.shape)
				if err != nil {
					return nil, err
				}
				dchanged = dchanged || ch
			}
			if dchanged {
				if c["decision"], err = json.Marshal(d); err != nil {
					return nil, err
				}
				changed = true
			}
		}
		ch, err := apply(c, "result", fieldResult)
		if err != nil {
			return nil, err
		}
		changed = changed || ch
	}
	if !changed {
		return s, nil
	}
	if pending["calls"], err = json.Marshal(calls); err != nil {
		return nil, err
	}
	if top["pending"], err = json.Marshal(pending); err != nil {
		return nil, err
	}
	if b, err = json.Marshal(top); err != nil {
		return nil, err
	}
	var out toolrun.State
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("toolrun: decoding the state: %w", err)
	}
	return &out, nil
}

// stateClaims returns the keys of the claims s refers to, sorted. It does
// no I/O, so a workflow may call it.
func stateClaims(s *toolrun.State, prefix string) []string {
	var keys []string
	_, _ = rewriteCalls(driver.Skeleton(s), func(f claimField, raw json.RawMessage) (json.RawMessage, error) {
		if key, ok := markKey(f, raw); ok && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return raw, nil
	})
	slices.Sort(keys)
	return slices.Compact(keys)
}

// approvalClaims returns the keys of the claims decision a refers to:
// those a client put in the Store with [ClientOptions].Store. It does no I/O, so a
// workflow may call it.
func approvalClaims(a Approval, prefix string) []string {
	var keys []string
	add := func(f claimField, raw json.RawMessage) {
		if key, ok := markKey(f, raw); ok && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	if key, ok := strings.CutPrefix(a.Decision.Reason, claimMark); ok && strings.HasPrefix(key, prefix) {
		keys = append(keys, key)
	}
	if len(a.Decision.Input) > 0 {
		add(fieldValue, a.Decision.Input)
	}
	if len(a.Decision.Result) > 0 {
		if b, err := json.Marshal(a.Decision.Result); err == nil {
			add(fieldContent, b)
		}
	}
	return keys
}

// claims puts the values over a threshold in a BlobStore and takes them
// back, for one activity or one client call.
type claims struct {
	store     BlobStore // nil: the worker or client keeps no blobs
	prefix    string    // the keys of this run's claims start with it
	threshold int       // values whose JSON is longer go to the Store; 0 for none
	unique    bool      // keys get a random suffix (a client's: see claimDecision)
	byHash    map[[sha256.Size]byte]string
	keys      []string // the claims the values stashed refer to
}

// restore returns s with the values its claims stand for in their place.
// A claim missing from the Store, or a claim met with no Store, is an
// error wrapping [ErrClaimMissing]; any other error of the Store is
// returned as it is, for the activity to be tried again.
func (c *claims) restore(ctx context.Context, s *toolrun.State) (*toolrun.State, error) {
	sk := driver.Skeleton(s)
	out, err := rewriteCalls(sk, func(f claimField, raw json.RawMessage) (json.RawMessage, error) {
		key, ok := markKey(f, raw)
		if !ok || !strings.HasPrefix(key, c.prefix) {
			return raw, nil
		}
		if c.store == nil {
			return nil, fmt.Errorf("%w: %q, and this worker's Store (toolrun.Options.Store) keeps no blobs (temporal.BlobStore)", ErrClaimMissing, key)
		}
		b, err := c.store.GetBlob(ctx, key)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %q: %w", ErrClaimMissing, key, err)
		}
		if err != nil {
			return nil, fmt.Errorf("toolrun: reading claim %q: %w", key, err)
		}
		c.remember(b, key)
		return b, nil
	})
	if err != nil || out == sk {
		return s, err
	}
	return driver.Merge(out, s), nil
}

// remember records that b is in the Store under key, so that stashing b
// again refers to key and writes nothing.
func (c *claims) remember(b []byte, key string) {
	if c.byHash == nil {
		c.byHash = map[[sha256.Size]byte]string{}
	}
	c.byHash[sha256.Sum256(b)] = key
}

// stashRaw returns raw, a field of shape f, or, if it is over the
// threshold, what stands for it once it is in the Store. A mark already
// there is kept, and counted among the claims referred to.
func (c *claims) stashRaw(ctx context.Context, f claimField, raw json.RawMessage) (json.RawMessage, error) {
	if key, ok := markKey(f, raw); ok && strings.HasPrefix(key, c.prefix) {
		c.keys = append(c.keys, key)
		return raw, nil
	}
	if c.store == nil || c.threshold <= 0 || len(raw) <= c.threshold {
		return raw, nil
	}
	key, err := c.put(ctx, raw)
	if err != nil {
		return nil, err
	}
	c.keys = append(c.keys, key)
	return markJSON(f, key), nil
}

// put saves b in the Store, unless it is there already, and returns its
// key: the hash of b, so that another attempt of the same activity writes
// the same key.
func (c *claims) put(ctx context.Context, b []byte) (string, error) {
	h := sha256.Sum256(b)
	if key, ok := c.byHash[h]; ok {
		return key, nil
	}
	key := c.prefix + hex.EncodeToString(h[:])
	if c.unique {
		var r [8]byte
		_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
		key += "-" + hex.EncodeToString(r[:])
	}
	if err := c.store.PutBlob(ctx, key, b); err != nil {
		return "", fmt.Errorf("toolrun: saving claim %q: %w", key, err)
	}
	c.remember(b, key)
	return key, nil
}

// stash returns s with each value of its turn's calls over the threshold
// in the Store and a mark in its place.
func (c *claims) stash(ctx context.Context, s *toolrun.State) (*toolrun.State, error) {
	return rewriteCalls(s, func(f claimField, raw json.RawMessage) (json.RawMessage, error) {
		return c.stashRaw(ctx, f, raw)
	})
}

// referred returns the claims the values stashed refer to, sorted.
func (c *claims) referred() []string {
	keys := slices.Clone(c.keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// claimsOf returns the claims of an activity of workflow workflowID with
// threshold (an option's value, see [thresholdOf]).
func (a *Activities) claimsOf(workflowID string, threshold int) *claims {
	blobs := driver.Blobs(a.store)
	return &claims{store: blobs, prefix: claimKeyPrefix(workflowID), threshold: thresholdOf(threshold)}
}

// stashStep puts the values of res over the threshold in the Store: those
// of the calls of its state's turn, and the inputs of the calls to run and
// of those it received and answered (whose results, like the ones it
// committed, are cut for the observers); res.Claims lists what res then
// refers to. It does so only where res's state is a skeleton (the worker
// keeps states in a Store): a whole state travels whole anyway.
func (c *claims) stashStep(ctx context.Context, res *StepResult) error {
	if c.store == nil || res.Ref == "" {
		return nil
	}
	st, err := c.stash(ctx, res.State)
	if err != nil {
		return err
	}
	res.State = st
	for id, r := range res.Committed {
		res.Committed[id] = cutCommitted(r, c.threshold)
	}
	for i := range res.Received {
		rc := &res.Received[i]
		in, err := c.stashRaw(ctx, fieldValue, rc.Call.Input)
		if err != nil {
			return err
		}
		rc.Call.Input = in
		if rc.Result != nil {
			cut := cutCommitted(rc.result(), c.threshold)
			rc.Decision, rc.Result = cut.Decision, cut
		}
	}
	for i := range res.Calls {
		in := res.Calls[i].Call.Input
		if len(in) == 0 {
			continue
		}
		out, err := c.stashRaw(ctx, fieldValue, in)
		if err != nil {
			return err
		}
		res.Calls[i].Call.Input = out
	}
	res.Claims = c.referred()
	return nil
}

// deleteSpent deletes the claims of keys, those of this run that no step
// reads again; best effort, as a value left behind costs room, not
// correctness.
func (a *Activities) deleteSpent(ctx context.Context, c *claims, keys []string) {
	if c.store == nil {
		return
	}
	for _, key := range keys {
		if !strings.HasPrefix(key, c.prefix) {
			continue
		}
		if err := c.store.DeleteBlob(ctx, key); err != nil {
			a.logger().Warn("toolrun: spent claim not deleted", "key", key, "error", err)
		}
	}
}

// DeleteClaimsInput is the input of [Activities.DeleteClaims].
type DeleteClaimsInput struct {
	// Keys are the claims to delete.
	Keys []string `json:"keys"`
}

// DeleteClaims deletes claims of the run that no step reads again: those
// left when a run ends (see [RunOptions.ClaimThreshold]). The workflow
// runs it once, as its execution ends; keys of another run are skipped.
func (a *Activities) DeleteClaims(ctx context.Context, in DeleteClaimsInput) error {
	blobs := driver.Blobs(a.store)
	if blobs == nil || !activity.IsActivity(ctx) {
		return nil
	}
	prefix := claimKeyPrefix(activity.GetInfo(ctx).WorkflowExecution.ID)
	var errs []error
	for _, key := range in.Keys {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		if err := blobs.DeleteBlob(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resultClaim puts res, the result of call id of st, in the Store if its
// JSON is over the threshold, and returns what stands for it and the key;
// or res and "" if it is not, or the Store failed (logged: the result then
// travels whole, within the payload limit).
func (a *Activities) resultClaim(ctx context.Context, c *claims, st *toolrun.State, id string, res *toolrun.ToolResult) (*toolrun.ToolResult, string) {
	if c.store == nil || c.threshold <= 0 {
		return res, ""
	}
	// The result as the workflow's State will keep it once recorded.
	scratch := driver.ForCall(st, id)
	if driver.SetResult(scratch, id, res) != nil {
		return res, ""
	}
	kept, ok := scratch.CallResult(id)
	if !ok {
		return res, ""
	}
	raw, err := json.Marshal(kept)
	if err != nil || len(raw) <= c.threshold {
		return res, ""
	}
	key, err := c.put(ctx, raw)
	if err != nil {
		a.logger().Warn("toolrun: tool result not put in the Store; it travels whole", "tool_use_id", id, "error", err)
		return res, ""
	}
	return &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text(markText(key))}, IsError: res.IsError, Ran: res.Ran, Duration: res.Duration, Truncated: res.Truncated}, key
}

// claimError returns err, a claim that could not be read, as a step's
// failure: not retried if the claim is missing, since it will still be;
// retried otherwise, since the Store may be back.
func claimError(err error) error {
	if errors.Is(err, ErrClaimMissing) {
		return activityError(err, "toolrun.ClaimMissing", true, 0)
	}
	return err
}

// claimStop is the answer of call id whose claims could not be read: the
// call is not run, its result says why, and the run stops with
// [toolrun.StopError], from which it can be resumed.
func claimStop(id string, err error) *ToolOutput {
	detail := fmt.Sprintf("call %s not run: %v", id, err)
	return &ToolOutput{
		Result:     &toolrun.ToolResult{Content: []toolrun.Content{toolrun.Text("toolrun: " + detail)}, IsError: true, Err: err},
		StopReason: toolrun.StopError,
		Detail:     detail,
	}
}

// drop drops decision a, with a warning saying why: the claims it refers
// to are spent.
func (w *run) drop(ctx workflow.Context, a Approval, why error) {
	workflow.GetLogger(ctx).Warn("toolrun: decision dropped", "tool_use_id", a.ToolUseID, "error", why.Error())
	keys := approvalClaims(a, "")
	w.spent = union(w.spent, without(keys, w.claims))
}

// addClaims records keys as referred to.
func (w *run) addClaims(keys ...string) {
	if len(keys) == 0 {
		return
	}
	w.claims = union(w.claims, keys)
	w.spent = without(w.spent, keys)
}

// afterStep takes what step in returned: the claims its result and the
// decisions not applied yet refer to are the run's, and the others are
// spent, for the next step to delete (not this one, which a retry may
// have needed them for); the claims in deleted.
func (w *run) afterStep(in StepInput, res *StepResult) {
	live := slices.Clone(res.Claims)
	for _, a := range w.buffered {
		live = append(live, approvalClaims(a, "")...)
	}
	live = union(nil, live)
	w.spent = union(without(w.spent, in.Spent), without(w.claims, live))
	w.claims = live
}

// releaseClaims deletes the claims no step reads again, as the execution
// ends: the spent ones, and those that the final state does not refer to
// (the Outcome's State, which LoadState reads, keeps its own).
func (w *run) releaseClaims(ctx workflow.Context) {
	if len(w.claims)+len(w.spent) == 0 {
		return
	}
	if workflow.GetVersion(ctx, versionClaims, workflow.DefaultVersion, 1) < 1 {
		return
	}
	keep := stateClaims(w.state, "")
	del := union(w.spent, without(w.claims, keep))
	w.claims, w.spent = keep, nil
	if len(del) == 0 {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdktemporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
		Summary:             fmt.Sprintf("delete %d claims", len(del)),
	})
	if err := workflow.ExecuteActivity(actx, DeleteClaimsActivity, DeleteClaimsInput{Keys: del}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("toolrun: claims not deleted", "keys", len(del), "error", err.Error())
	}
}

// union returns the sorted keys of a and b, each once.
func union(a, b []string) []string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// without returns the keys of a that are not in b.
func without(a, b []string) []string {
	var out []string
	for _, k := range a {
		if !slices.Contains(b, k) {
			out = append(out, k)
		}
	}
	return out
}

// cutCommitted returns r, a result that [StepResult.Committed] carries for
// the run's observers ([Follow]), within limit bytes of JSON: its text
// cut, its decision's reason cut and its edit and result left out, since
// the claim check keeps such values out of the history. The run's State,
// which the model's requests are built from, keeps the result whole; the
// observers already have the call's input from the step that planned it.
func cutCommitted(r *toolrun.ToolResult, limit int) *toolrun.ToolResult {
	if r == nil || limit <= 0 {
		return r
	}
	b, err := json.Marshal(r)
	if err != nil || len(b) <= limit {
		return r
	}
	out := *r
	out.Call.Input = nil
	out.Decision.Reason = cutUTF8(out.Decision.Reason, limit/4)
	out.Decision.Input, out.Decision.Result = nil, nil
	var text strings.Builder
	for _, c := range r.Content {
		if c.OfText != nil {
			text.WriteString(c.OfText.Text)
		}
	}
	out.Content = []toolrun.Content{toolrun.Text(cutUTF8(text.String(), limit/2) + fmt.Sprintf(" [cut for observers: the result is %d bytes of JSON, which the model receives whole]", len(b)))}
	out.Truncated = true
	return &out
}

// cutUTF8 returns s cut to at most n bytes, at a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
