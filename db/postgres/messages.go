package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// Reading mail (db.Messages): list pages, one message, its raw bytes, and the reads of a
// wait (MessagesSince). Every read is bounded: a page by its limit, a message by its own
// size, and what the contract lets grow without bound (raw bytes, attachments) is read in
// chunks (attachments.go).

// summaryColumns are what a list item shows, of messages m joined with its thread t and
// inbox i (messageFrom): the labels as an array in label order, so a page needs no second
// query for them; attachment_count says whether attachments must be loaded at all.
const summaryColumns = `m.id, m.uuid, m.inbox_id, m.thread_id, m.message_id, t.uuid, i.address, m.direction, m.ts, m.from_addr,
	m.to_addrs, m.subject, m.preview, m.quarantined, m.triage, m.protection, m.delivery,
	ARRAY(SELECT l.label FROM message_labels l WHERE l.message_id = m.id ORDER BY l.label), m.attachment_count`

// messageFrom joins what summaryColumns read.
const messageFrom = " FROM messages m JOIN threads t ON t.id = m.thread_id JOIN inboxes i ON i.id = m.inbox_id"

// bodyColumns are the fields only a full message carries (bodyFields scans them).
const bodyColumns = "m.cc_addrs, m.bcc_addrs, m.reply_to, m.body_text, m.body_html, m.in_reply_to, m.refs"

// scanSummary scans summaryColumns, then the columns of extra.
func scanSummary(row rowScanner, extra ...any) (*db.Message, error) {
	var (
		m                      db.Message
		ts                     int64
		to                     string
		triage, prot, delivery *string
	)
	dest := append([]any{&m.ID, &m.UUID, &m.InboxRowID, &m.ThreadRowID, &m.MessageID, &m.ThreadID, &m.InboxID, &m.Direction,
		&ts, &m.From, &to, &m.Subject, &m.Preview, &m.Quarantined, &triage, &prot, &delivery, &m.Labels, &m.AttachmentCount}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	m.Timestamp = fromMillis(ts)
	m.To = db.DecodeList(to)
	if m.Labels == nil {
		m.Labels = []string{}
	}
	m.Attachments = []db.AttachmentSummary{}
	if err := parseOptional(triage, &m.Triage); err != nil {
		return nil, err
	}
	if err := parseOptional(prot, &m.Protection); err != nil {
		return nil, err
	}
	if err := parseOptional(delivery, &m.Delivery); err != nil {
		return nil, err
	}
	return &m, nil
}

// parseOptional decodes a nullable JSON column into a new value at *dst, leaving *dst nil
// for NULL.
func parseOptional[T any](s *string, dst **T) error {
	if s == nil {
		return nil
	}
	*dst = new(T)
	return parseJSON(s, *dst)
}

// bodyFields scans bodyColumns into a message.
type bodyFields struct {
	cc, bcc, replyTo, refs string
}

func (b *bodyFields) dest(m *db.Message) []any {
	return []any{&b.cc, &b.bcc, &b.replyTo, &m.BodyText, &m.BodyHTML, &m.InReplyTo, &b.refs}
}

func (b *bodyFields) apply(m *db.Message) {
	m.Cc, m.Bcc, m.ReplyTo, m.References = db.DecodeList(b.cc), db.DecodeList(b.bcc), db.DecodeList(b.replyTo), db.DecodeList(b.refs)
}

// scanFull scans summaryColumns and bodyColumns (it takes no extra columns: it has the
// signature of scanSummary, to be chosen in its place).
func scanFull(row rowScanner, _ ...any) (*db.Message, error) {
	var b bodyFields
	var body db.Message
	m, err := scanSummary(row, b.dest(&body)...)
	if err != nil {
		return nil, err
	}
	m.BodyText, m.BodyHTML, m.InReplyTo = body.BodyText, body.BodyHTML, body.InReplyTo
	b.apply(m)
	return m, nil
}

// filterWhere appends the triage filters of f on messages alias m.
func filterWhere(f db.MessageFilter, m string, q *strings.Builder, args *sqlArgs) {
	if f.Category != "" {
		q.WriteString(" AND " + m + ".tri_category = " + args.add(f.Category))
	}
	if f.NeedsReply != "" {
		q.WriteString(" AND " + m + ".tri_reply = " + args.add(f.NeedsReply))
	}
	if f.Urgency != "" {
		q.WriteString(" AND " + m + ".tri_urgency = " + args.add(f.Urgency))
	}
	if f.HasTriage() {
		// Triage is withheld while a message is quarantined, so it cannot match either.
		q.WriteString(" AND NOT " + m + ".quarantined")
	}
}

// listWhere writes the start of a summary query: an inbox's messages that pass f as
// listMessages filters them (every label of f; trash and quarantine only when asked for).
func listWhere(inboxID int64, f db.MessageFilter, q *strings.Builder, args *sqlArgs) {
	q.WriteString("SELECT " + summaryColumns + messageFrom + " WHERE m.inbox_id = " + args.add(inboxID))
	filterWhere(f, "m", q, args)
	for _, l := range f.Labels {
		q.WriteString(" AND EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = " + args.add(l) + ")")
	}
	if !f.Has(db.LabelTrash) {
		q.WriteString(" AND NOT EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'trash')")
	}
	if !f.Has(db.LabelQuarantined) {
		q.WriteString(" AND NOT m.quarantined")
	}
}

// querySummaries runs a summary query and fills the attachments of the rows that have
// any. The two statements need no common snapshot: attachments are written with their
// message and never change.
func querySummaries(ctx context.Context, q querier, query string, args ...any) ([]db.Message, error) {
	rows, err := q.Query(ctx, query, args...)
	out, err := collectMessages(rows, err, scanSummary)
	if err != nil {
		return nil, err
	}
	return out, fillAttachments(ctx, q, out)
}

// collectMessages reads the messages of a query with read (scanSummary, scanFull); none is
// an empty slice.
func collectMessages(rows pgx.Rows, err error, read func(rowScanner, ...any) (*db.Message, error)) ([]db.Message, error) {
	return collect(rows, err, func(r pgx.CollectableRow) (db.Message, error) {
		m, err := read(r)
		if err != nil {
			return db.Message{}, err
		}
		return *m, nil
	})
}

// fillAttachments loads the attachment summaries of the messages that have attachments.
func fillAttachments(ctx context.Context, q querier, msgs []db.Message) error {
	ids, idx := db.AttachmentsToLoad(msgs)
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT id, message_id, uuid, filename, content_type, size FROM attachments
		WHERE message_id = ANY($1) ORDER BY message_id, position`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	return db.FillAttachments(rows, msgs, idx)
}

// ListMessages returns one page of an inbox's messages, newest first (messages_by_time).
//
// Errors: invalid_argument (page token).
func (s *Store) ListMessages(ctx context.Context, inboxID int64, f db.MessageFilter, limit int, pageToken string) ([]db.Message, string, error) {
	scope := f.Scope("messages", inboxID)
	c, err := s.tokens.DecodePageToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	var q strings.Builder
	var args sqlArgs
	listWhere(inboxID, f, &q, &args)
	q.WriteString(keyset("m.ts", "m.id", true, c, limit, &args))
	out, err := querySummaries(ctx, s.pool, q.String(), args...)
	if err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(m db.Message) (int64, int64) { return millis(m.Timestamp.Time), m.ID })
	return out, next, nil
}

// GetMessage returns one message with everything a full view may show.
//
// Errors: not_found.
func (s *Store) GetMessage(ctx context.Context, inboxID int64, messageID string) (*db.Message, error) {
	m, err := scanFull(s.pool.QueryRow(ctx, "SELECT "+summaryColumns+", "+bodyColumns+messageFrom+
		" WHERE m.inbox_id = $1 AND m.message_id = $2", inboxID, messageID))
	if noRows(err) {
		return nil, db.Errorf(db.ECodeNotFound, "message %s not found", messageID)
	}
	if err != nil {
		return nil, storageError(err)
	}
	msgs := []db.Message{*m}
	if err := fillAttachments(ctx, s.pool, msgs); err != nil {
		return nil, storageError(err)
	}
	return &msgs[0], nil
}

// MessageRaw returns the raw RFC 5322 bytes of message row.
//
// Errors: not_found (the message was deleted).
func (s *Store) MessageRaw(ctx context.Context, messageRow int64) ([]byte, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT string_agg(c.data, ''::bytea ORDER BY c.seq) FROM raw_chunks c
		WHERE c.message_id = m.id), ''::bytea) FROM messages m WHERE m.id = $1`, messageRow).Scan(&raw)
	if noRows(err) {
		return nil, db.Errorf(db.ECodeNotFound, "message not found")
	}
	return raw, storageError(err)
}

// rawPrefix returns at least the first limit bytes of message row's raw bytes (all of
// them when shorter), reading only the chunks that hold them.
func rawPrefix(ctx context.Context, q querier, messageRow int64, limit int) ([]byte, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT COALESCE(string_agg(data, ''::bytea ORDER BY seq), ''::bytea) FROM raw_chunks
		WHERE message_id = $1 AND seq < $2`, messageRow, (limit+chunkSize-1)/chunkSize).Scan(&raw)
	return raw, err
}

// MessagesSince returns up to q.Limit summaries of an inbox's messages that pass f and
// that q chooses, oldest first: it walks the inbox's time index upwards from q.Since (or
// past q.After), so a read costs what it returns plus what f leaves out on the way.
func (s *Store) MessagesSince(ctx context.Context, inboxID int64, f db.MessageFilter, q db.SinceQuery) ([]db.Message, error) {
	if q.Rows != nil && len(q.Rows) == 0 || q.Limit <= 0 {
		return []db.Message{}, nil
	}
	var b strings.Builder
	var args sqlArgs
	listWhere(inboxID, f, &b, &args)
	b.WriteString(" AND m.ts >= " + args.add(millis(q.Since)))
	if q.After != nil {
		b.WriteString(" AND (m.ts, m.id) > (" + args.add(millis(q.After.Timestamp)) + ", " + args.add(q.After.ID) + ")")
	}
	if q.Rows != nil {
		b.WriteString(" AND m.id = ANY(" + args.add(q.Rows) + ")")
	}
	b.WriteString(" ORDER BY m.ts, m.id LIMIT " + strconv.Itoa(q.Limit))
	out, err := querySummaries(ctx, s.pool, b.String(), args...)
	return out, storageError(err)
}

// collect reads every row of rows with scan; an empty result is an empty slice.
func collect[T any](rows pgx.Rows, err error, scan func(r pgx.CollectableRow) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, scan)
	if out == nil && err == nil {
		out = []T{}
	}
	return out, err
}
