// The browser half of the example: CopilotKit's v2 chat, unchanged, with
// toolrun's approvals rendered by useInterrupt, a frontend tool
// (useFrontendTool) and a human-in-the-loop tool (useHumanInTheLoop), as
// CopilotKit's docs describe them. Nothing here knows it talks to toolrun:
// the approve, deny and edit buttons answer with the spec's
// {approved, editedArgs} payload (AG-UI docs/concepts/interrupts.mdx).
import React from "react";
import { createRoot } from "react-dom/client";
import { CopilotKit, CopilotChat, useInterrupt, useFrontendTool, useHumanInTheLoop } from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { z } from "zod";

function Approval({ interrupt, interrupts, resolve }) {
  return (
    <div data-testid="approvals" style={{ border: "1px solid #888", padding: 8, margin: 8 }}>
      {interrupts.map((it) => {
        const args = it.metadata?.input ?? it.metadata?.args;
        return (
          <div key={it.id} data-testid="approval" data-call={it.toolCallId}>
            <p>{it.message ?? `approve ${it.toolCallId}?`}</p>
            {args ? <pre>{JSON.stringify(args)}</pre> : null}
            <button data-testid={`approve-${it.toolCallId}`} onClick={() => resolve({ approved: true }, it.id)}>Approve</button>
            <button data-testid={`deny-${it.toolCallId}`} onClick={() => resolve({ approved: false }, it.id)}>Deny</button>
            <button data-testid={`edit-${it.toolCallId}`} onClick={() => resolve({ approved: true, editedArgs: { path: "a.txt" } }, it.id)}>Approve reading a.txt instead</button>
          </div>
        );
      })}
    </div>
  );
}

function Tools() {
  useInterrupt({ render: (props) => <Approval {...props} /> });
  useFrontendTool({
    name: "get_location",
    description: "Where the user is.",
    parameters: z.object({ precise: z.boolean().optional() }),
    handler: async () => "Paris",
  });
  useHumanInTheLoop({
    name: "confirm_order",
    description: "Order an item, once the user confirms.",
    parameters: z.object({ item: z.string() }),
    render: ({ args, status, respond }) => (
      <div data-testid="confirm-order" data-status={status}>
        <p>Order {args?.item}?</p>
        {status === "executing" ? (
          <button data-testid="confirm-order-yes" onClick={() => respond("the user confirmed the order")}>Confirm</button>
        ) : null}
      </div>
    ),
  });
  return null;
}

function App() {
  return (
    <CopilotKit runtimeUrl="/api/copilotkit" useSingleEndpoint={false}>
      <Tools />
      <div style={{ height: "100vh" }}>
        <CopilotChat />
      </div>
    </CopilotKit>
  );
}

createRoot(document.getElementById("root")).render(<App />);
