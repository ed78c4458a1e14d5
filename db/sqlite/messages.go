package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/inboxd/inboxd/db"

	"github.com/google/uuid"
	// A drop-in encoding/json with cached codecs: list pages decode the triage,
	// protection and delivery of every row, which dominated their CPU time.
	json "github.com/segmentio/encoding/json"
)

// packedMessage is what costs CPU to make of a NewMessage's stored form: the compressed
// body and verdict JSON. The callers of insertMessage make it with pack before their
// write transaction, so concurrent deliveries compress in parallel instead of one after
// another inside the store's single writer.
type packedMessage struct {
	body, triage, protection, detail any
	// rawChunked: the raw bytes are large and go to raw_chunks, compressed a chunk at a
	// time while they are written, rather than into body (chunks.go).
	rawChunked bool
}

// rawBytes is Trace and Raw in one slice (a copy only when there is a Trace).
func rawBytes(n *db.NewMessage) []byte {
	if n.Trace == "" {
		return n.Raw
	}
	b := make([]byte, 0, len(n.Trace)+len(n.Raw))
	return append(append(b, n.Trace...), n.Raw...)
}

func pack(n *db.NewMessage) *packedMessage {
	p := &packedMessage{}
	if len(n.Trace)+len(n.Raw) > splitAbove {
		p.body, p.rawChunked = packText(n.Text, n.HTML), true
	} else {
		p.body = packBody(n.Text, n.HTML, rawBytes(n))
	}
	if n.Triage != nil {
		p.triage = packJSON(jsonText(n.Triage))
	}
	if n.Protection != nil {
		p.protection = packJSON(jsonText(n.Protection))
	}
	if n.ProtectionDetail != nil {
		p.detail = packJSON(jsonText(n.ProtectionDetail))
	}
	return p
}

// storeLocal stores the copy of a local delivery, o.Local packed as p (pack(o.Local)), by
// the rules of db.StoreLocal, at the copy's own time, and returns the outcome to record.
func storeLocal(ctx context.Context, tx *sql.Tx, sig *eventSignal, o db.OutboundOutcome, p *packedMessage) (db.OutboundOutcome, error) {
	return db.StoreLocal(&unit{ctx: ctx, tx: tx, now: o.Local.Timestamp, events: sig}, &prepared{m: *o.Local, p: p}, o)
}

// writeMessage writes message n into thread (db.Tx.WriteMessage).
func writeMessage(ctx context.Context, tx *sql.Tx, n *db.NewMessage, p *packedMessage, thread db.ThreadRef, withTriage bool) (db.Stored, error) {
	var delivJSON sql.NullString
	var cat, reply, urg sql.NullString
	triage := p.triage
	if n.Triage != nil && n.Triage.Status == db.TriageComplete {
		cat, reply, urg = triageFilterColumns(n.Triage)
	}
	if !withTriage {
		triage, cat, reply, urg = nil, sql.NullString{}, sql.NullString{}, sql.NullString{}
	}
	if n.Delivery != nil {
		delivJSON = jsonText(n.Delivery)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO messages(uuid, inbox_id, thread_id, message_id, direction, ts, from_addr,
		to_addrs, cc_addrs, bcc_addrs, reply_to, subject, preview, in_reply_to, refs, attachment_count,
		quarantined, triage_z, tri_category, tri_reply, tri_urgency, protection_z, delivery, body_size, body)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		newRowUUID(), n.InboxID, thread.Row, n.MessageID, n.Direction, millis(n.Timestamp), n.From,
		db.EncodeList(n.To), db.EncodeList(n.Cc), db.EncodeList(n.Bcc), db.EncodeList(n.ReplyTo), n.Subject, n.Preview,
		n.InReplyTo, db.EncodeList(n.References), len(n.Attachments), n.Quarantined(),
		triage, cat, reply, urg, p.protection, delivJSON, bodySize(n.Text, n.HTML), p.body)
	if err != nil {
		return db.Stored{}, err
	}
	rowID, err := res.LastInsertId()
	if err != nil {
		return db.Stored{}, err
	}
	if err := writeMessageParts(ctx, tx, rowID, n, p); err != nil {
		return db.Stored{}, err
	}
	if err := settleThread(ctx, tx, thread.Row, rowID, n); err != nil {
		return db.Stored{}, err
	}
	if n.QueuesTriage() {
		if err := enqueueTriage(ctx, tx, rowID, n.Timestamp, n.TriageSignals); err != nil {
			return db.Stored{}, err
		}
	}
	if err := enqueueIndex(ctx, tx, "m.id = ?", rowID); err != nil {
		return db.Stored{}, err
	}
	return db.Stored{RowID: rowID, MessageID: n.MessageID, ThreadID: thread.UUID}, nil
}

// writeMessageParts writes what a new message row has beside it: labels, the protection
// detail, raw chunks and attachments.
func writeMessageParts(ctx context.Context, tx *sql.Tx, rowID int64, n *db.NewMessage, p *packedMessage) error {
	for _, l := range n.Labels {
		if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO message_labels(message_id, label) VALUES (?, ?)", rowID, l); err != nil {
			return err
		}
	}
	if err := saveProtectionDetail(ctx, tx, rowID, p.detail); err != nil {
		return err
	}
	if p.rawChunked {
		if err := insertRawChunks(ctx, tx, rowID, n.Trace, n.Raw); err != nil {
			return err
		}
	}
	return insertAttachments(ctx, tx, rowID, n.Attachments)
}

// insertAttachments stores the attachments of message row: inline up to chunkSize bytes,
// in chunks above.
func insertAttachments(ctx context.Context, tx *sql.Tx, messageRow int64, atts []db.NewAttachment) error {
	for i, a := range atts {
		content, chunked := a.Content, len(a.Content) > chunkSize
		if chunked {
			content = []byte{}
		}
		var row int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO attachments(uuid, message_id, position, filename, content_type, size, content, chunked)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, newRowUUID(), messageRow, i, a.Filename, a.ContentType, len(a.Content),
			content, chunked).Scan(&row); err != nil {
			return err
		}
		if chunked {
			if err := insertAttachmentChunks(ctx, tx, row, a.Content); err != nil {
				return err
			}
		}
	}
	return nil
}

// threadsOf returns the threads of the stored, non-quarantined messages of an inbox among
// the Message-IDs ids (db.Tx.ThreadsOf).
func threadsOf(ctx context.Context, tx *sql.Tx, inboxID int64, ids []string) (map[string]db.ThreadRef, error) {
	q := `SELECT m.message_id, t.id, t.uuid FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.inbox_id = +? AND m.quarantined = 0 AND m.message_id IN (` + placeholders(len(ids)) + ")"
	args := []any{inboxID}
	for _, c := range ids {
		args = append(args, c)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanThreadRefs(rows, map[string]db.ThreadRef{})
}

// newRowUUID returns the UUID of a new message, thread or attachment: version 7, whose
// leading timestamp makes each insert land at the end of its unique index instead of on a
// random page of it (fewer pages read, dirtied and written to the WAL per delivery).
func newRowUUID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func newThread(ctx context.Context, tx *sql.Tx, inboxID int64, threadUUID string) (int64, string, error) {
	res, err := tx.ExecContext(ctx, "INSERT INTO threads(uuid, inbox_id) VALUES (?, ?)", threadUUID, inboxID)
	if err != nil {
		return 0, "", err
	}
	id, err := res.LastInsertId()
	return id, threadUUID, err
}

// refreshThread recomputes a thread's aggregates from its messages, and drops a thread
// that has none left. One function keeps every writer of messages consistent with it.
func refreshThread(ctx context.Context, tx *sql.Tx, threadID int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE threads SET
		last_message = (SELECT id FROM messages WHERE thread_id = ?1 ORDER BY ts DESC, id DESC LIMIT 1),
		last_ts = COALESCE((SELECT MAX(ts) FROM messages WHERE thread_id = ?1), 0),
		message_count = (SELECT COUNT(*) FROM messages WHERE thread_id = ?1),
		attachment_count = (SELECT COALESCE(SUM(attachment_count), 0) FROM messages WHERE thread_id = ?1),
		received_ts = (SELECT MAX(ts) FROM messages WHERE thread_id = ?1 AND direction = 'received'),
		sent_ts = (SELECT MAX(ts) FROM messages WHERE thread_id = ?1 AND direction = 'sent'),
		all_trashed = NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = ?1 AND NOT EXISTS
			(SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'trash')),
		quarantined = NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = ?1 AND quarantined = 0)
		WHERE id = ?1`, threadID)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM threads WHERE id = ? AND message_count = 0", threadID)
	if err != nil {
		return err
	}
	if gone, err := res.RowsAffected(); err != nil || gone > 0 {
		return err
	}
	return keepThreadLists(ctx, tx, threadID)
}

// keepThreadLists recomputes the lists a thread row keeps (migration 0007): senders and
// recipients in order of first appearance, and the union of its messages' labels.
func keepThreadLists(ctx context.Context, tx *sql.Tx, threadID int64) error {
	rows, err := tx.QueryContext(ctx, "SELECT from_addr, to_addrs, cc_addrs FROM messages WHERE thread_id = +? ORDER BY ts, id", threadID)
	if err != nil {
		return err
	}
	var l threadLists
	l.Participants, err = db.ScanParticipants(rows)
	rows.Close()
	if err != nil {
		return err
	}
	rows, err = tx.QueryContext(ctx, `SELECT DISTINCT l.label FROM message_labels l JOIN messages m ON m.id = l.message_id
		WHERE m.thread_id = +? ORDER BY l.label`, threadID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var label string
		if err := rows.Scan(&label); err != nil {
			rows.Close()
			return err
		}
		l.labels = append(l.labels, label)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "UPDATE threads SET senders = ?, recipients = ?, labels = ? WHERE id = ?",
		db.EncodeList(l.Senders), db.EncodeList(l.Recipients), db.EncodeList(l.labels), threadID)
	return err
}

// threadLists are the lists a thread row keeps: its participants and its labels.
type threadLists struct {
	db.Participants
	labels []string
}

func triageFilterColumns(t *db.Triage) (cat, reply, urg sql.NullString) {
	if t.Category != nil {
		cat = sql.NullString{String: t.Category.Value, Valid: true}
	}
	if r := t.ReplyFilter(); r != "" {
		reply = sql.NullString{String: r, Valid: true}
	}
	if t.Urgency != nil && t.Urgency.Value != nil {
		urg = sql.NullString{String: *t.Urgency.Value, Valid: true}
	}
	return cat, reply, urg
}

func jsonText(v any) sql.NullString {
	b, _ := json.Marshal(v)
	return sql.NullString{String: string(b), Valid: true}
}

// idArgs are row ids as the arguments of an IN list.
func idArgs(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// where appends the filter's conditions on the message alias m.
func filterWhere(f db.MessageFilter, m string, q *strings.Builder, args *[]any) {
	if f.Category != "" {
		q.WriteString(" AND " + m + ".tri_category = +?")
		*args = append(*args, f.Category)
	}
	if f.NeedsReply != "" {
		q.WriteString(" AND " + m + ".tri_reply = +?")
		*args = append(*args, f.NeedsReply)
	}
	if f.Urgency != "" {
		q.WriteString(" AND " + m + ".tri_urgency = +?")
		*args = append(*args, f.Urgency)
	}
	if f.HasTriage() {
		// Triage is withheld while a message is quarantined, so it cannot match either.
		q.WriteString(" AND " + m + ".quarantined = 0")
	}
}

// summaryColumns are what a list item shows, labels included (a JSON array, in label
// order, from the row's own primary-key range) so a page needs no second query for them;
// attachment_count says whether attachments must be loaded at all. The thread's id and
// the inbox's address are scalar subqueries, not joins: measured on 200,000 messages, the
// same lookups written as JOINs made a message read twice as costly.
const summaryColumns = `m.id, m.uuid, m.inbox_id, m.thread_id, m.message_id,
	(SELECT t.uuid FROM threads t WHERE t.id = m.thread_id), (SELECT i.address FROM inboxes i WHERE i.id = m.inbox_id),
	m.direction, m.ts, m.from_addr,
	m.to_addrs, m.subject, m.preview, m.quarantined, m.triage_z, m.protection_z, m.delivery,
	(SELECT json_group_array(l.label ORDER BY l.label) FROM message_labels l WHERE l.message_id = m.id), m.attachment_count`

func scanSummary(row interface{ Scan(...any) error }, extra ...any) (*db.Message, error) {
	var (
		m            db.Message
		ts           int64
		to, labels   string
		triage, prot zjson
		delivery     sql.NullString
	)
	dest := append([]any{&m.ID, &m.UUID, &m.InboxRowID, &m.ThreadRowID, &m.MessageID, &m.ThreadID, &m.InboxID, &m.Direction,
		&ts, &m.From, &to, &m.Subject, &m.Preview, &m.Quarantined, &triage, &prot, &delivery, &labels, &m.AttachmentCount}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	m.Timestamp = fromMillis(ts)
	m.To = db.DecodeList(to)
	m.Labels = db.DecodeList(labels)
	m.Attachments = []db.AttachmentSummary{}
	if triage.Valid {
		m.Triage = new(db.Triage)
		if err := json.Unmarshal([]byte(triage.String), m.Triage); err != nil {
			return nil, err
		}
	}
	if prot.Valid {
		m.Protection = new(db.Protection)
		if err := json.Unmarshal([]byte(prot.String), m.Protection); err != nil {
			return nil, err
		}
	}
	if delivery.Valid {
		m.Delivery = new(db.Delivery)
		if err := json.Unmarshal([]byte(delivery.String), m.Delivery); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

const messageFrom = " FROM messages m"

// ListMessages returns one page of an inbox's messages, newest first. Trashed and
// quarantined messages are left out unless the filter's labels ask for them.
//
// Errors: invalid_argument (page token).
func (s *Store) ListMessages(ctx context.Context, inboxID int64, f db.MessageFilter, limit int, pageToken string) ([]db.Message, string, error) {
	scope := f.Scope("messages", inboxID)
	c, err := s.decodeToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	query, args := listMessagesQuery(inboxID, f, c, limit)
	out, err := querySummariesOn(ctx, s.r, query, args...)
	if err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(m db.Message) (int64, int64) { return millis(m.Timestamp.Time), m.ID })
	return out, next, nil
}

// listMessagesQuery is the statement of a listMessages page. It reads the inbox's
// messages_by_time entries newest first; the triage filters and the quarantine flag are
// checked on the entry itself (migration 0009), before the row is read.
func listMessagesQuery(inboxID int64, f db.MessageFilter, c *cursor, limit int) (string, []any) {
	var q strings.Builder
	args := listWhere(inboxID, f, &q)
	page, pageArgs := keyset("m.ts", "m.id", true, c, limit)
	q.WriteString(page)
	return q.String(), append(args, pageArgs...)
}

// listWhere writes the start of a list statement over summaries (summaryColumns): the
// inbox's messages that pass f as listMessages filters them. It returns the arguments.
func listWhere(inboxID int64, f db.MessageFilter, q *strings.Builder) []any {
	args := []any{inboxID}
	q.WriteString("SELECT " + summaryColumns + messageFrom + " WHERE m.inbox_id = +?")
	filterWhere(f, "m", q, &args)
	for _, l := range f.Labels {
		q.WriteString(" AND EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = ?)")
		args = append(args, l)
	}
	if !f.Has(db.LabelTrash) {
		q.WriteString(" AND NOT EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'trash')")
	}
	if !f.Has(db.LabelQuarantined) {
		q.WriteString(" AND m.quarantined = 0")
	}
	return args
}

// querySummaries runs a summary query (summaryColumns) and fills the attachments of the
// rows that have any.
func querySummaries(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]db.Message, error) {
	return querySummariesOn(ctx, tx, query, args...)
}

// querySummariesOn is querySummaries outside a transaction too: one statement reads the
// rows with their labels, and attachments never change once written.
func querySummariesOn(ctx context.Context, tx querier, query string, args ...any) ([]db.Message, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out := []db.Message{}
	for rows.Next() {
		m, err := scanSummary(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, *m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, fillAttachments(ctx, tx, out)
}

// querier is a *sql.Tx or a *sql.DB.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// fillAttachments loads the attachment summaries of the messages that have attachments.
func fillAttachments(ctx context.Context, q querier, msgs []db.Message) error {
	ids, idx := db.AttachmentsToLoad(msgs)
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.QueryContext(ctx, "SELECT id, message_id, uuid, filename, content_type, size FROM attachments WHERE message_id IN ("+
		placeholders(len(ids))+") ORDER BY message_id, position", idArgs(ids)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return db.FillAttachments(rows, msgs, idx)
}

// fillLabelsAndAttachments loads labels and attachments of messages known by row id only.
func fillLabelsAndAttachments(ctx context.Context, tx *sql.Tx, msgs []db.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	idx := make(map[int64]int, len(msgs))
	args := make([]any, len(msgs))
	for i := range msgs {
		idx[msgs[i].ID] = i
		args[i] = msgs[i].ID
		msgs[i].Labels = []string{}
		msgs[i].AttachmentCount = 1 // unknown: look
	}
	in := placeholders(len(msgs))
	err := eachLabel(tx.QueryContext(ctx, "SELECT message_id, label FROM message_labels WHERE message_id IN ("+in+") ORDER BY message_id, label", args...))(
		func(id int64, l string) { msgs[idx[id]].Labels = append(msgs[idx[id]].Labels, l) })
	if err != nil {
		return err
	}
	return fillAttachments(ctx, tx, msgs)
}

// eachLabel reads rows of (row id, label) from a query's result, handing each to add in
// order; call it as eachLabel(tx.QueryContext(...))(add).
func eachLabel(rows *sql.Rows, err error) func(add func(id int64, label string)) error {
	return func(add func(id int64, label string)) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var l string
			if err := rows.Scan(&id, &l); err != nil {
				return err
			}
			add(id, l)
		}
		return rows.Err()
	}
}

// bodyColumns are the fields only a full message carries (scanned by bodyDest).
const bodyColumns = "m.cc_addrs, m.bcc_addrs, m.reply_to, m.body, m.in_reply_to, m.refs"

type bodyFields struct {
	cc, bcc, replyTo, refs string
	body                   []byte
}

func (b *bodyFields) dest(m *db.Message) []any {
	return []any{&b.cc, &b.bcc, &b.replyTo, &b.body, &m.InReplyTo, &b.refs}
}

func (b *bodyFields) apply(m *db.Message) error {
	m.Cc, m.Bcc, m.ReplyTo, m.References = db.DecodeList(b.cc), db.DecodeList(b.bcc), db.DecodeList(b.replyTo), db.DecodeList(b.refs)
	var err error
	m.BodyText, m.BodyHTML, _, err = unpackBody(b.body, false)
	return err
}

// fillBodies loads the fields only a full message carries.
func fillBodies(ctx context.Context, tx *sql.Tx, m *db.Message) error {
	var b bodyFields
	if err := tx.QueryRowContext(ctx, "SELECT "+bodyColumns+" FROM messages m WHERE m.id = ?", m.ID).Scan(b.dest(m)...); err != nil {
		return err
	}
	return b.apply(m)
}

// GetMessage returns one message with everything a full view may show.
//
// Errors: not_found.
func (s *Store) GetMessage(ctx context.Context, inboxID int64, messageID string) (*db.Message, error) {
	// One statement reads the row, its labels and bodies: one snapshot, no transaction.
	// Attachments are written with their message and never change, so reading them
	// after it cannot mix two states.
	var b bodyFields
	var body db.Message
	m, err := scanSummary(s.r.QueryRowContext(ctx, "SELECT "+summaryColumns+", "+bodyColumns+messageFrom+
		" WHERE m.inbox_id = ? AND m.message_id = ?", inboxID, messageID), b.dest(&body)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.Errorf(db.ECodeNotFound, "message %s not found", messageID)
	}
	if err != nil {
		return nil, storageError(err)
	}
	m.InReplyTo = body.InReplyTo
	if err := b.apply(m); err != nil {
		return nil, err
	}
	msgs := []db.Message{*m}
	if err := fillAttachments(ctx, s.r, msgs); err != nil {
		return nil, storageError(err)
	}
	return &msgs[0], nil
}
