package postgres

import (
	"regexp"
	"testing"

	qt "github.com/frankban/quicktest"
)

// Every table the migrations create is copied by an import or named as not copied, so a
// table added to the schema is not silently left behind by `inboxd migrate`; and every
// name of those lists is a table of the schema.
func TestImportAccountsForEveryTable(t *testing.T) {
	c := qt.New(t)
	names, err := migrationNames()
	c.Assert(err, qt.IsNil)
	created := map[string]bool{"schema_migrations": true} // made by migrate itself
	re := regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)`)
	for _, n := range names {
		body, err := migrations.ReadFile("migrations/" + n)
		c.Assert(err, qt.IsNil)
		for _, m := range re.FindAllStringSubmatch(string(body), -1) {
			created[m[1]] = true
		}
	}
	for table := range created {
		c.Check(Accounted(table), qt.IsTrue, qt.Commentf("table %s is neither in CopiedTables nor in notCopied (import.go)", table))
	}
	for _, t := range CopiedTables {
		c.Check(created[t.Name], qt.IsTrue, qt.Commentf("CopiedTables names %s, which no migration creates", t.Name))
	}
	for table := range notCopied {
		c.Check(created[table], qt.IsTrue, qt.Commentf("notCopied names %s, which no migration creates", table))
	}
}
