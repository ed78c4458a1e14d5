package schema

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/inboxd/inboxd/db"
)

// The JSON Schemas must spell out values that db defines in Go: the triage values in the
// filters of the list and search operations and in the triage object of every message,
// and the plan catalog in getUsage's response. These tests fail
// when the two disagree, so a value changed in one place cannot silently be refused (or
// let through) by the other.

func TestSchemaFiltersSpellTheTriageValuesOfGo(t *testing.T) {
	defs := loadDefs(t)
	for name, want := range map[string][]string{
		"category":         db.TriageCategories(),
		"urgency":          db.UrgencyLevels(),
		"needsReplyFilter": db.ReplyFilters(),
	} {
		var got []string
		decodeAt(t, defs, &got, name, "enum")
		if !slices.Equal(got, want) {
			t.Errorf("defs.json %s enum is %q; db has %q", name, got, want)
		}
	}
}

func TestSchemaTriageResultSpellsTheTriageValuesOfGo(t *testing.T) {
	complete := completeTriage(t, loadDefs(t))
	var probs struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	decodeAt(t, complete, &probs, "properties", "category", "properties", "probabilities")
	if want := db.TriageCategories(); !slices.Equal(probs.Required, want) || !sameKeys(probs.Properties, want) {
		t.Errorf("defs.json triage category probabilities require %q and allow %d keys; db has %q", probs.Required, len(probs.Properties), want)
	}
	var urgency []*string
	decodeAt(t, complete, &urgency, "properties", "urgency", "properties", "value", "enum")
	want := append(db.UrgencyLevels(), "") // the schema's null, decoded as a nil pointer
	got := make([]string, len(urgency))
	for i, u := range urgency {
		if u != nil {
			got[i] = *u
		}
	}
	if !slices.Equal(got, want) || urgency[len(urgency)-1] != nil {
		t.Errorf("defs.json triage urgency value enum is %q; db has %q and null", got, db.UrgencyLevels())
	}
}

// The plan catalog has its home in db; getUsage's response schema names its plans.
func TestSchemaPlanCatalogIsTheCatalogOfGo(t *testing.T) {
	raw, err := files.ReadFile("json/ops/getUsage.json")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	decodeAt(t, raw, &got, "response", "properties", "plans", "items", "properties", "planId", "enum")
	var want []string
	for _, p := range db.Plans() {
		want = append(want, p.PlanID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("getUsage.json plans planId enum is %q; db's catalog has %q", got, want)
	}
}

// Send and reply refuse the label that db reserves for the scanner.
func TestSchemaRefusesTheLabelDBReservesForTheScanner(t *testing.T) {
	if quarantinedLabel != db.LabelQuarantined {
		t.Errorf("schema refuses the label %q; db reserves %q", quarantinedLabel, db.LabelQuarantined)
	}
	if db.CheckLabelChange([]string{quarantinedLabel}, nil) == nil {
		t.Errorf("db lets a client add the label %q that schema refuses", quarantinedLabel)
	}
}

func loadDefs(t *testing.T) json.RawMessage {
	t.Helper()
	raw, err := files.ReadFile("json/defs.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// completeTriage returns the branch of defs.json's triage oneOf for a complete result.
func completeTriage(t *testing.T, defs json.RawMessage) json.RawMessage {
	t.Helper()
	var branches []json.RawMessage
	decodeAt(t, defs, &branches, "triage", "oneOf")
	for _, b := range branches {
		var status string
		decodeAt(t, b, &status, "properties", "status", "const")
		if status == db.TriageComplete {
			return b
		}
	}
	t.Fatal("defs.json triage has no branch for a complete result")
	return nil
}

// decodeAt decodes the member of doc at the path of object keys into v.
func decodeAt(t *testing.T, doc json.RawMessage, v any, path ...string) {
	t.Helper()
	for _, k := range path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(doc, &obj); err != nil || obj[k] == nil {
			t.Fatalf("the schema has no member %q on the path %q", k, path)
		}
		doc = obj[k]
	}
	if err := json.Unmarshal(doc, v); err != nil {
		t.Fatalf("the schema at %q: %v", path, err)
	}
}

func sameKeys(m map[string]json.RawMessage, keys []string) bool {
	if len(m) != len(keys) {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}
