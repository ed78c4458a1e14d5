package postgres

import (
	"github.com/inboxd/inboxd/db"

	// A drop-in encoding/json with cached codecs: list pages decode the triage,
	// protection and delivery of every row.
	json "github.com/segmentio/encoding/json"
)

// The encodings of the schema's text columns: lists as JSON arrays (db.EncodeList),
// verdicts and the delivery record as JSON objects, NULL for absent.

// jsonText encodes v for a nullable JSON column: nil stays NULL.
func jsonText(v any) *string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	s := string(b)
	return &s
}

// parseJSON decodes a nullable JSON column into dst, leaving it alone for NULL.
func parseJSON(s *string, dst any) error {
	if s == nil {
		return nil
	}
	return json.Unmarshal([]byte(*s), dst)
}

// nullString is s, or NULL when it is empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// triageFilterColumns are the copies of a complete triage result that list filters match
// on (messages.tri_category, tri_reply, tri_urgency).
func triageFilterColumns(t *db.Triage) (cat, reply, urg *string) {
	if t.Category != nil {
		cat = &t.Category.Value
	}
	if r := t.ReplyFilter(); r != "" {
		reply = &r
	}
	if t.Urgency != nil && t.Urgency.Value != nil {
		urg = t.Urgency.Value
	}
	return cat, reply, urg
}

// rowScanner is a row of a query: pgx.Row or pgx.Rows.
type rowScanner interface{ Scan(dest ...any) error }
