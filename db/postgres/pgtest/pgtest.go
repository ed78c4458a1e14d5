// Package pgtest gives each test a fresh, empty PostgreSQL database of its own, on the
// cluster INBOXD_TEST_POSTGRES names (a postgres:// URL of a user that may create
// databases; scripts/pg-cluster.sh starts a throwaway one, scripts/test.sh does it for
// the whole run). Without it a test skips, except with CI=true, where a missing
// PostgreSQL fails the test instead of hiding it.
//
// Each database is a copy (CREATE DATABASE ... TEMPLATE) of a template that holds the
// schema already, made once per version of the migrations and kept on the cluster for the
// next run: a copy takes milliseconds where migrating takes far longer.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/inboxd/inboxd/db/postgres"
)

// EnvURL names the variable that holds the cluster's URL.
const EnvURL = "INBOXD_TEST_POSTGRES"

// NewDatabase creates a database for t with the current schema, dropped when t ends, and
// returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, ensureTemplate)
}

// NewEmptyDatabase creates a database for t without any table (what `inboxd migrate`
// fills), dropped when t ends, and returns its URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, func(context.Context, string) (string, error) { return "template0", nil })
}

// ClusterURL returns the URL of the test cluster: a test that needs PostgreSQL but no
// database of this package's (one that starts a cluster of its own, to restart it) calls
// it to skip, or fail with CI=true, as the others do when there is none.
func ClusterURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: CI must run the PostgreSQL tests (scripts/test.sh starts a cluster)", EnvURL)
		}
		t.Skipf("%s is not set: no PostgreSQL to test against (scripts/pg-cluster.sh starts one)", EnvURL)
	}
	return base
}

// newDatabase creates a database for t as a copy of the template that template names.
func newDatabase(t testing.TB, template func(ctx context.Context, base string) (string, error)) string {
	t.Helper()
	base := ClusterURL(t)
	ctx := context.Background()
	tmpl, err := template(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: template database: %v", err)
	}
	name := "inboxd_t_" + randomHex(8)
	if err := admin(ctx, base, "CREATE DATABASE "+name+" TEMPLATE "+tmpl); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := admin(context.Background(), base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(base, name)
}

// ensureTemplate returns the name of the template of the current migrations, making it
// when the cluster has none: built under a name of its own, then renamed, so that no copy
// is ever made of a template half built (two test binaries may build one at once; the
// second rename fails and its copy is dropped).
func ensureTemplate(ctx context.Context, base string) (string, error) {
	name := "inboxd_template_" + postgres.SchemaVersion()
	exists, err := databaseExists(ctx, base, name)
	if err != nil || exists {
		return name, err
	}
	building := name + "_" + randomHex(4)
	if err := admin(ctx, base, "CREATE DATABASE "+building+" TEMPLATE template0"); err != nil {
		return "", err
	}
	st, err := postgres.Open(ctx, withDatabase(base, building), postgres.Options{})
	if err == nil {
		err = st.ForgetSecrets(ctx) // each copy makes secrets and a store id of its own
		st.Close()
	}
	if err == nil {
		err = admin(ctx, base, "ALTER DATABASE "+building+" RENAME TO "+name)
		var pe *pgconn.PgError
		// Another binary built it first: PostgreSQL says so as duplicate_database, or,
		// when the two renames meet in the catalog, as a unique violation of its index.
		if errors.As(err, &pe) && (pe.Code == "42P04" || pe.Code == "23505") {
			err = nil
		}
	}
	if dropErr := admin(ctx, base, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err == nil {
		err = dropErr
	}
	return name, err
}

func databaseExists(ctx context.Context, base, name string) (bool, error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var ok bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	return ok, err
}

// admin runs one statement on the cluster's own database.
func admin(ctx context.Context, base, sql string) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns base with its database replaced by name.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
