package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The operator's key and account commands. They work on the database file directly, also
// while a server runs on it: a server trusts what it resolved of a key for at most a few
// seconds (the store's auth cache), so a revoked key or a disabled account stops working
// there within that bound.

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"create": runKeysCreate, "list": runKeysList, "revoke": runKeysRevoke,
	}
	if len(args) == 0 || sub[args[0]] == nil {
		return usageError{"keys: give a subcommand: create, list or revoke\n" + usage}
	}
	return sub[args[0]](ctx, args[1:], stdout, stderr)
}

func runKeysCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys create", stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	account := fs.String("account", "", "account id")
	var scopes multiFlag
	fs.Var(&scopes, "scopes", "comma-separated scopes of an account key ("+strings.Join(db.AllScopes(), ",")+")")
	inbox := fs.String("inbox", "", "inbox address of a mailbox key")
	days := fs.Int("days", db.DefaultKeyDays, "lifetime of an account key in days (1-365)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("keys create: unexpected argument %q", fs.Arg(0))}
	}
	if *account == "" || (len(scopes) == 0) == (*inbox == "") {
		return usageError{"keys create: give --account and exactly one of --scopes or --inbox"}
	}
	daysSet := false
	fs.Visit(func(f *flag.Flag) { daysSet = daysSet || f.Name == "days" })
	if daysSet && *inbox != "" {
		return usageError{"keys create: --days is for account keys; a mailbox key lasts until the next one replaces it"}
	}
	if *days < 1 || *days > db.MaxKeyDays {
		return usageError{"keys create: --days must be 1 to 365"}
	}
	store, err := openExisting(ctx, "keys create", *path)
	if err != nil {
		return err
	}
	defer store.Close()
	var k db.NewKey
	if *inbox != "" {
		in, err := store.InboxByAddress(ctx, *account, *inbox)
		if err != nil {
			return err
		}
		// A new mailbox key replaces the inbox's old one (API-NOTES section 1).
		k = db.NewMailboxKey(in, true)
	} else {
		k = db.NewAccountKey(*account, scopes, *days, store.Now())
	}
	if err := db.CreateKey(ctx, store, k); err != nil {
		return err
	}
	fmt.Fprintln(stdout, k.Token)
	fmt.Fprintf(stderr, "key id %s (inboxd keys list, inboxd keys revoke)\n", db.KeyIDOfToken(k.Token))
	return nil
}

// runKeysList prints the keys of one account or of all: id, kind, scopes or inbox, and
// whether each works; never a token.
func runKeysList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys list", stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	account := fs.String("account", "", "only the keys of this account")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("keys list: unexpected argument %q", fs.Arg(0))}
	}
	store, err := openExisting(ctx, "keys list", *path)
	if err != nil {
		return err
	}
	defer store.Close()
	keys, err := store.ListKeys(ctx, *account)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY ID\tPREFIX\tACCOUNT\tKIND\tSCOPES OR INBOX\tCREATED\tEXPIRES\tSTATUS")
	for _, k := range keys {
		kind, what := "account", strings.Join(k.Scopes, ",")
		if k.Mailbox {
			kind, what = "mailbox", k.Inbox
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.KeyID, k.Prefix, k.AccountID, kind, what,
			day(&k.CreatedAt), day(k.ExpiresAt), k.Status(store.Now()))
	}
	return w.Flush()
}

func day(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format("2006-01-02")
}

// runKeysRevoke revokes one key by the id keys list and keys create print.
func runKeysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys revoke", stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"keys revoke: name one key id: inboxd keys revoke --db PATH KEYID"}
	}
	store, err := openExisting(ctx, "keys revoke", *path)
	if err != nil {
		return err
	}
	defer store.Close()
	k, err := store.RevokeKey(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s (%s, account %s) at %s\n", k.KeyID, k.Prefix, k.AccountID, k.RevokedAt.UTC().Format(time.RFC3339))
	return nil
}

// runAccounts disables an account (its keys get access_denied) or enables it again.
func runAccounts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "disable" && args[0] != "enable") {
		return usageError{"accounts: give a subcommand: disable or enable\n" + usage}
	}
	name := "accounts " + args[0]
	fs := newFlagSet(name, stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	if err := parseWithEnv(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Sprintf("%s: name one account: inboxd %s --db PATH ID", name, name)}
	}
	store, err := openExisting(ctx, name, *path)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.SetAccountDisabled(ctx, fs.Arg(0), args[0] == "disable"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "account %s %sd\n", fs.Arg(0), args[0])
	return nil
}
