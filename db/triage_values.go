package db

// The values a complete triage result may take (spec section 2.4). These functions are
// their one home in Go: the classifiers, the LLM prompt and answer schema, and the fixture
// checker read them here. The JSON Schemas (schema/json/defs.json) must spell them out
// again; a test in schema fails when the two disagree. Each call returns a new slice, so
// no caller can change the rule for another.

// TriageCategories returns the triage categories in the order the model and the wire use.
func TriageCategories() []string {
	return []string{"billing", "support", "sales", "personal", "notification", "other"}
}

// UrgencyLevels returns the urgency values for urgency scores 0 to 3.
func UrgencyLevels() []string {
	return []string{"low", "normal", "high", "critical"}
}

// ReplyFilters returns the needsReply filter values (Triage.ReplyFilter): a complete
// result whose needsReply is true, false or null.
func ReplyFilters() []string {
	return []string{replyYes, replyNo, replyUncertain}
}

const (
	replyYes       = "yes"
	replyNo        = "no"
	replyUncertain = "uncertain"
)
