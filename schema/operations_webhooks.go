package schema

// webhookOperations manage webhooks (extensions section 2): account keys only, and no MCP
// tools (section 8).
var webhookOperations = []Operation{
	{ID: "createWebhook", Method: "POST", Path: "/v1/webhooks", Scope: "inboxes:write", Extension: true, NoTool: true,
		Summary: "Creates a webhook that receives the account's events, signed with the secret it returns."},
	{ID: "listWebhooks", Method: "GET", Path: "/v1/webhooks", Scope: "inboxes:read", Extension: true, NoTool: true,
		Summary: "Returns one page of the account's webhooks, newest first."},
	{ID: "getWebhook", Method: "GET", Path: "/v1/webhooks/{webhookId}", Scope: "inboxes:read", Extension: true, NoTool: true,
		Summary: "Returns one webhook."},
	{ID: "updateWebhook", Method: "PATCH", Path: "/v1/webhooks/{webhookId}", Scope: "inboxes:write", Extension: true, NoTool: true,
		Summary: "Changes a webhook's URL, event types, inboxes, description or whether it is enabled; events while it is disabled are never delivered."},
	{ID: "deleteWebhook", Method: "DELETE", Path: "/v1/webhooks/{webhookId}", Scope: "inboxes:write", Extension: true, NoTool: true,
		Summary: "Deletes a webhook; its pending deliveries are dropped."},
	{ID: "listWebhookDeliveries", Method: "GET", Path: "/v1/webhooks/{webhookId}/deliveries", Scope: "inboxes:read", Extension: true, NoTool: true,
		Summary: "Returns one page of a webhook's deliveries, newest first, with their attempts and outcomes."},
}
