package temporal

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"
)

// The search attributes [Workflow] keeps up to date as the run changes
// (unless [RunOptions.NoSearchAttributes]), so that runs are found with a
// visibility query rather than a query per workflow: for example, the runs
// awaiting approval ([ListAwaitingApproval]), or with the Temporal CLI
//
//	temporal workflow list --query 'ToolrunAwaitingApproval = true AND ExecutionStatus = "Running"'
//
// They must be registered in the namespace before the first run (see
// [SearchAttributes]): with the CLI, `temporal operator search-attribute
// create --name ToolrunStatus --type Keyword` and so on, or with
// `temporal server start-dev --search-attribute ToolrunStatus=Keyword …`.
var (
	// StatusAttribute is the run's status: "running",
	// "awaiting_approval", or the [toolrun.StopReason] it stopped with
	// ("canceled", [toolrun.StopCanceled], for a cancelled workflow). An
	// execution that ended never shows "awaiting_approval"; see
	// [Workflow] for what each way of ending leaves.
	StatusAttribute = sdktemporal.NewSearchAttributeKeyKeyword("ToolrunStatus")
	// AwaitingApprovalAttribute is true while a call awaits a person.
	AwaitingApprovalAttribute = sdktemporal.NewSearchAttributeKeyBool("ToolrunAwaitingApproval")
	// ModelAttribute is the run's model.
	ModelAttribute = sdktemporal.NewSearchAttributeKeyKeyword("ToolrunModel")
	// TurnsAttribute counts the run's turns so far.
	TurnsAttribute = sdktemporal.NewSearchAttributeKeyInt64("ToolrunTurns")
	// CostAttribute is what the run's responses cost so far, in USD.
	CostAttribute = sdktemporal.NewSearchAttributeKeyFloat64("ToolrunCostUSD")
)

// SearchAttributes returns the names and types of the search attributes
// the workflow upserts, as the operator API's AddSearchAttributes takes
// them and `temporal server start-dev --search-attribute NAME=TYPE` in the
// order given there.
func SearchAttributes() map[string]enums.IndexedValueType {
	return map[string]enums.IndexedValueType{
		StatusAttribute.GetName():           enums.INDEXED_VALUE_TYPE_KEYWORD,
		AwaitingApprovalAttribute.GetName(): enums.INDEXED_VALUE_TYPE_BOOL,
		ModelAttribute.GetName():            enums.INDEXED_VALUE_TYPE_KEYWORD,
		TurnsAttribute.GetName():            enums.INDEXED_VALUE_TYPE_INT,
		CostAttribute.GetName():             enums.INDEXED_VALUE_TYPE_DOUBLE,
	}
}

// AwaitingRun is a run found by [ListAwaitingApproval].
type AwaitingRun struct {
	WorkflowID string
	RunID      string
	Model      string
	Turns      int64
	CostUSD    float64
	// Since is when the workflow's current run started: for a run that
	// continued as new, when it last did.
	Since time.Time
}

// AwaitingApprovalQuery is the visibility query of [ListAwaitingApproval].
const AwaitingApprovalQuery = `ToolrunAwaitingApproval = true AND ExecutionStatus = "Running"`

// ListAwaitingApproval returns the running runs with a call awaiting a
// person's approval, from the namespace's visibility store with
// [AwaitingApprovalQuery]: one request per page of results, however many
// runs there are, and no worker needed. Visibility is eventually
// consistent: a run that just started waiting shows up a moment later.
// Then [Pending] lists a run's calls, and [Decide] decides them.
func ListAwaitingApproval(ctx context.Context, c client.Client) ([]AwaitingRun, error) {
	var out []AwaitingRun
	var token []byte
	// Search attributes are encoded with the default converter whatever
	// the client's (the server indexes them, so no codec applies), and
	// decoded so here.
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: AwaitingApprovalQuery, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("toolrun: list runs awaiting approval: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			r := AwaitingRun{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()}
			if t := e.GetStartTime(); t != nil {
				r.Since = t.AsTime()
			}
			fields := e.GetSearchAttributes().GetIndexedFields()
			decode := func(name string, v any) {
				if p, ok := fields[name]; ok {
					_ = dc.FromPayload(p, v) // a value of another type leaves the field zero
				}
			}
			decode(ModelAttribute.GetName(), &r.Model)
			decode(TurnsAttribute.GetName(), &r.Turns)
			decode(CostAttribute.GetName(), &r.CostUSD)
			out = append(out, r)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}
