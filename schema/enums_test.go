package schema

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/mail/triage"
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
	complete := triageBranch(t, loadDefs(t), db.TriageComplete)
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

// Every other enum of defs.json is spelled in Go as constants; the schema must list exactly
// those, in the same order.
func TestSchemaEnumsSpellTheConstantsOfGo(t *testing.T) {
	defs := loadDefs(t)
	for _, c := range []struct {
		doc  json.RawMessage
		path []string
		want []string
	}{
		{triageBranch(t, defs, db.TriageFailed), []string{"properties", "code", "enum"}, []string{triage.CodeUnavailable, triage.CodeRejected, triage.CodeInvalidResponse}},
		{defs, []string{"authResult", "enum"}, []string{protect.Pass, protect.Fail, protect.None, protect.TempError, protect.PermError, protect.Unavailable}},
		{defs, []string{"protection", "properties", "status", "enum"}, []string{db.ProtectionClean, db.ProtectionQuarantined, db.ProtectionReleased}},
		{defs, []string{"protection", "properties", "antivirus", "properties", "status", "enum"}, []string{protect.AVClean, protect.AVInfected, protect.AVUnscannable}},
		{defs, []string{"protection", "properties", "reasons", "items", "enum"}, []string{protect.ReasonMalware, protect.ReasonSpam, protect.ReasonAuthentication, protect.ReasonScanIncomplete}},
		{defs, []string{"inbox", "properties", "deliveryStatus", "enum"}, []string{db.DeliveryPending, db.DeliveryReady}},
		{defs, []string{"message", "properties", "senderAuthentication", "enum"}, []string{db.SenderAuthenticated, db.SenderUnauthenticated, db.SenderUnchecked}},
		{defs, []string{"delivery", "properties", "recipients", "items", "properties", "status", "enum"}, []string{db.RecipientQueued, db.RecipientAccepted,
			db.RecipientDelivered, db.RecipientDeferred, db.RecipientBounced, db.RecipientFailed, db.RecipientRejected, db.RecipientComplained}},
	} {
		var got []string
		decodeAt(t, c.doc, &got, c.path...)
		if !slices.Equal(got, c.want) {
			t.Errorf("defs.json %q is %q; Go has %q", c.path, got, c.want)
		}
	}
}

// The plan catalog has its home in db; getUsage's response schema names its plans.
func TestSchemaPlanCatalogIsTheCatalogOfGo(t *testing.T) {
	raw, err := files.ReadFile("json/defs.json")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	decodeAt(t, raw, &got, "usage", "properties", "plans", "items", "properties", "planId", "enum")
	var want []string
	for _, p := range db.Plans() {
		want = append(want, p.PlanID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("defs.json usage plans planId enum is %q; db's catalog has %q", got, want)
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

// triageBranch returns the branch of defs.json's triage oneOf for a result of status.
func triageBranch(t *testing.T, defs json.RawMessage, status string) json.RawMessage {
	t.Helper()
	var branches []json.RawMessage
	decodeAt(t, defs, &branches, "triage", "oneOf")
	for _, b := range branches {
		var s string
		decodeAt(t, b, &s, "properties", "status", "const")
		if s == status {
			return b
		}
	}
	t.Fatalf("defs.json triage has no branch for status %s", status)
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
