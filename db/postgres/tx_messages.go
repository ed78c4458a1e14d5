package postgres

import (
	"context"
	"hash/fnv"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// Writing mail in a unit of work: a new message with its parts, its thread's aggregates,
// labels, verdicts and deletion. Every writer of a message keeps its thread's aggregates
// (queueSettleThread, refreshThread) and queues what search shows (enqueueIndex, log.go).

// prepared is a message made ready to store: its verdicts encoded before the unit, so
// that the unit spends its time on the rows.
type prepared struct {
	m          db.NewMessage
	triage     *string // JSON of m.Triage
	protection *string // JSON of m.Protection
	detail     *string // JSON of m.ProtectionDetail
}

func (p *prepared) Message() *db.NewMessage { return &p.m }

// Prepare encodes m's verdicts outside the unit of work (db.Units).
func (s *Store) Prepare(m *db.NewMessage) db.Prepared { return prepare(m) }

func prepare(m *db.NewMessage) *prepared {
	p := &prepared{m: *m}
	if m.Triage != nil {
		p.triage = jsonText(m.Triage)
	}
	if m.Protection != nil {
		p.protection = jsonText(m.Protection)
	}
	if m.ProtectionDetail != nil {
		p.detail = jsonText(m.ProtectionDetail)
	}
	return p
}

// StoredMessage is the first thing storing a message asks (db.StoreMessage), so it also
// keeps the inbox from being deleted under the delivery (queueShareInbox), and takes the
// message's threading lock (below), in the same round trip.
func (u *unit) StoredMessage(inboxID int64, messageID string) (*db.Stored, error) {
	b := &pgx.Batch{}
	locked := u.queueShareInbox(b, inboxID)
	if u.takeThreadLocks(1) == 1 {
		k1, k2 := threadingKey(inboxID, messageID)
		b.Queue("SELECT pg_advisory_xact_lock($1, $2)", k1, k2)
	}
	var st *db.Stored
	b.Queue(`SELECT m.id, m.message_id, t.uuid FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.inbox_id = $1 AND m.message_id = $2`, inboxID, messageID).QueryRow(func(row pgx.Row) error {
		var found db.Stored
		err := row.Scan(&found.RowID, &found.MessageID, &found.ThreadID)
		if noRows(err) {
			return nil
		}
		st = &found
		return err
	})
	if err := u.send(b); err != nil {
		return nil, err
	}
	locked()
	return st, nil
}

// InboxRetired answers from what StoredMessage read with the inbox's lock, which a
// deletion waits for; it reads and locks itself when asked first.
func (u *unit) InboxRetired(inboxID int64) (bool, error) {
	if retired, ok := u.read.retired[inboxID]; ok {
		return retired, nil
	}
	b := &pgx.Batch{}
	locked := u.queueShareInbox(b, inboxID)
	if err := u.send(b); err != nil {
		return false, err
	}
	locked()
	return u.read.retired[inboxID], nil
}

func (u *unit) ThreadByUUID(inboxID int64, uuid string) (int64, bool, error) {
	var row int64
	err := u.queryRow("SELECT id FROM threads WHERE uuid = $1 AND inbox_id = $2", uuid, inboxID).Scan(&row)
	if noRows(err) {
		return 0, false, nil
	}
	return row, err == nil, err
}

// Threading locks. A message joins the thread of the latest message it names that is
// stored (db.chooseThread); on SQLite's one writer, that is every one committed before it.
// Here two units at READ COMMITTED each miss the other's uncommitted row: a reply whose
// unit looked for its original just before the original committed on another process
// would start a thread of its own, and commit after it, for good. So each message takes,
// to the end of its transaction, an exclusive advisory lock keyed by its inbox and
// Message-ID before it is stored (StoredMessage), and a shared one of each Message-ID it
// names before it looks for them (ThreadsOf, the lookup a statement after, so that it sees
// what committed while it waited): of a reply and its original stored at once, either the
// original commits first and the reply then finds it, or the reply commits first and the
// original waits for it, as on SQLite. Replies to one message share its lock.
//
// PostgreSQL keeps these locks in a table of fixed size, shared by every session, and a
// transaction holds them to its end; so they are bounded. Only the last maxThreadLocks
// Message-IDs a message names are locked: a message stored at the same instant as one it
// names is almost always the one it answers (the last, In-Reply-To), the older ones of a
// thread were stored long before. And a transaction takes at most maxTxThreadLocks, all a
// full group of deliveries needs (group.go), where concurrent deliveries race: a unit that
// stores more (a fixture set loaded by seed, a benchmark's batch) stores the rest without
// them, rather than fail with "out of shared memory".
const (
	maxThreadLocks   = 8
	maxTxThreadLocks = maxGroupUnits * (1 + maxThreadLocks)
)

// takeThreadLocks returns how many of n threading locks w may still take, and counts them
// taken. (A savepoint rolled back releases its locks and leaves the count: w then takes
// fewer, never more.)
func (w *wtx) takeThreadLocks(n int) int {
	n = min(n, maxTxThreadLocks-w.threadLocks)
	w.threadLocks += n
	return n
}

// threadingKey is the advisory lock of a Message-ID of an inbox: two int4 keys, a space
// apart from the bigint keys of the log and migration locks. A collision of two ids only
// makes their units wait for each other.
func threadingKey(inboxID int64, messageID string) (int32, int32) {
	h := fnv.New32a()
	h.Write([]byte(messageID))
	return int32(inboxID), int32(h.Sum32())
}

func (u *unit) ThreadsOf(inboxID int64, ids []string) (map[string]db.ThreadRef, error) {
	found := map[string]db.ThreadRef{}
	if len(ids) == 0 {
		return found, nil
	}
	named := ids[len(ids)-u.takeThreadLocks(min(len(ids), maxThreadLocks)):]
	b := &pgx.Batch{}
	if len(named) > 0 {
		keys := make([]int32, len(named))
		var k1 int32
		for i, id := range named {
			k1, keys[i] = threadingKey(inboxID, id)
		}
		// In key order, so that two units naming the same ids take them in one order.
		b.Queue("SELECT pg_advisory_xact_lock_shared($1, k) FROM (SELECT DISTINCT k FROM unnest($2::int4[]) k ORDER BY k) s", k1, keys)
	}
	b.Queue(`SELECT m.message_id, t.id, t.uuid FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.inbox_id = $1 AND NOT m.quarantined AND m.message_id = ANY($2)`, inboxID, ids).Query(func(rows pgx.Rows) error {
		var err error
		found, err = db.ScanThreadRefs(rows, found)
		return err
	})
	if err := u.send(b); err != nil {
		return nil, err
	}
	return found, nil
}

// NewThread takes the new thread's row from the store's reserve (threadIDs) and sends its
// insert ahead of the unit's next statement, the message's insert: no round trip of its
// own.
func (u *unit) NewThread(inboxID int64, uuid string) (db.ThreadRef, error) {
	if uuid == "" {
		uuid = newRowUUID()
	}
	t := db.ThreadRef{UUID: uuid}
	var err error
	if t.Row, err = u.threadIDs.next(u.wtx); err != nil {
		return t, err
	}
	b := &pgx.Batch{}
	b.Queue("INSERT INTO threads(id, uuid, inbox_id) VALUES ($1, $2, $3)", t.Row, uuid, inboxID)
	u.sendLater(b)
	if u.fresh == nil {
		u.fresh = map[int64]bool{}
	}
	u.fresh[t.Row] = true
	return t, nil
}

// threadIDBlock is how many thread rows a store takes from their sequence at a time.
const threadIDBlock = 64

// idReserve is thread rows a store took from their sequence in a block and has not given
// out yet: a new thread's row is then known without a round trip. Rows taken and never
// used (a unit rolled back, a process stopped) are gaps in the sequence, as a rolled-back
// insert leaves; rows of one process ascend, of several interleave.
type idReserve struct {
	mu  sync.Mutex
	ids []int64
}

// next gives out a reserved row, reading a new block in w's transaction when none is
// left (nextval is not undone with it).
func (r *idReserve) next(w *wtx) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		rows, err := w.query("SELECT nextval(pg_get_serial_sequence('threads', 'id')) FROM generate_series(1, $1)", threadIDBlock)
		if err != nil {
			return 0, err
		}
		ids, err := db.ScanRows(rows, db.ScanInt64)
		rows.Close()
		if err != nil {
			return 0, err
		}
		r.ids = ids
	}
	id := r.ids[0]
	r.ids = r.ids[1:]
	return id, nil
}

func (u *unit) WriteMessage(p db.Prepared, thread db.ThreadRef, withTriage bool) (db.Stored, error) {
	return u.writeMessage(p.(*prepared), thread, withTriage, nil)
}

// WriteMessageCharged writes the message with its triage and spends its unit of a in the
// round trip that takes the log lock, just before it (queueTriageCharge).
func (u *unit) WriteMessageCharged(p db.Prepared, thread db.ThreadRef, a db.Allowance) (db.Stored, error) {
	return u.writeMessage(p.(*prepared), thread, true, &a)
}

// writeMessage writes a new message into thread with its parts, settles the thread and
// queues the message for triage (when it asks for it) and for search; charge, when not
// nil, is the allowance its triage unit is spent from.
func (w *wtx) writeMessage(p *prepared, thread db.ThreadRef, withTriage bool, charge *db.Allowance) (db.Stored, error) {
	n := &p.m
	triage := p.triage
	var cat, reply, urg *string
	if n.Triage != nil && n.Triage.Status == db.TriageComplete {
		cat, reply, urg = triageFilterColumns(n.Triage)
	}
	if !withTriage {
		triage, cat, reply, urg = nil, nil, nil, nil
	}
	var delivery *string
	if n.Delivery != nil {
		delivery = jsonText(n.Delivery) // read now: it may change after Prepare (db.Units)
	}
	var rowID int64
	err := w.queryRow(`INSERT INTO messages(uuid, inbox_id, thread_id, message_id, direction, ts, from_addr,
		to_addrs, cc_addrs, bcc_addrs, reply_to, subject, preview, in_reply_to, refs, attachment_count,
		quarantined, triage, tri_category, tri_reply, tri_urgency, protection, delivery, body_size, body_text, body_html)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)
		RETURNING id`,
		newRowUUID(), n.InboxID, thread.Row, n.MessageID, n.Direction, millis(n.Timestamp), n.From,
		db.EncodeList(n.To), db.EncodeList(n.Cc), db.EncodeList(n.Bcc), db.EncodeList(n.ReplyTo), n.Subject, n.Preview,
		n.InReplyTo, db.EncodeList(n.References), len(n.Attachments), n.Quarantined(),
		triage, cat, reply, urg, p.protection, delivery, bodySize(n.Text, n.HTML), n.Text, n.HTML).Scan(&rowID)
	if err != nil {
		return db.Stored{}, err
	}
	b := &pgx.Batch{}
	w.queueMessageParts(b, rowID, p)
	if n.QueuesTriage() {
		b.Queue(`INSERT INTO triage_queue(message_id, next_at, created_at, signals) VALUES ($1, 0, $2, $3)
			ON CONFLICT (message_id) DO NOTHING`, rowID, millis(n.Timestamp), *jsonText(n.TriageSignals))
	}
	// A thread this transaction made is seen by no other, so it settles in the same round
	// trip; a thread others may touch is locked before the log (log.go: the log lock comes
	// last). The round trip that takes the log lock goes with the unit's next (its
	// event's, or its commit): sendLater.
	if w.fresh[thread.Row] {
		delete(w.fresh, thread.Row)
		w.queueSettleThread(b, thread.Row, rowID, n)
	} else {
		if err := w.send(b); err != nil {
			return db.Stored{}, err
		}
		if err := w.appendToThread(thread.Row, rowID, n); err != nil {
			return db.Stored{}, err
		}
		b = &pgx.Batch{}
	}
	// The tail: the charge, then the log lock and the change log (log.go: the log lock
	// comes last). In a group it waits for the group's end (deferLast).
	charged, tail := &pgx.Batch{}, &pgx.Batch{}
	queueTriageCharge(charged, charge, rowID)
	w.queueIndex(tail, "m.id = $1", rowID)
	if w.grouped {
		w.sendLater(b)
		if charge != nil {
			w.deferCharge(charge.AccountID, charged)
		}
		w.deferLast(tail)
		remember(&w.read.rowInbox, rowID, n.InboxID)
	} else {
		b.QueuedQueries = append(append(b.QueuedQueries, charged.QueuedQueries...), tail.QueuedQueries...)
		w.sendLater(b)
	}
	return db.Stored{RowID: rowID, MessageID: n.MessageID, ThreadID: thread.UUID}, nil
}

// queueTriageCharge queues in b the spending of the triage unit of message row from
// allowance a (nil: nothing to spend) and, when a's limit is reached, the taking away of
// the triage the message was written with, as writeMessage with withTriage false would
// have written it. The check and the spending are one statement on the usage row, under
// its lock (as UsedUnits and SpendUnit, which the other charges use), so a reached limit
// refuses exactly as db.Charge does.
//
// Every charging unit of an account queues on that row, held to the commit; so the charge
// is queued as late as the order of locks allows: just before the log lock (log.go: the
// log lock comes last), after the message's rows and its thread's lock. The row is then
// held for the appends to the logs and the commit, which serialize every unit anyway,
// rather than for the whole unit (issue 30: 0.37 of SQLite's ingest rate with the charge
// first).
func queueTriageCharge(b *pgx.Batch, a *db.Allowance, messageRow int64) {
	if a == nil {
		return
	}
	var limit *int64 // nil: unmetered
	if !a.Unmetered {
		limit = &a.Limit
	}
	b.Queue(`WITH spent AS (
			INSERT INTO usage(account_id, period, feature, used) SELECT $1, $2, $3, 1 WHERE $4::bigint IS NULL OR $4::bigint > 0
			ON CONFLICT (account_id, period, feature) DO UPDATE SET used = usage.used + 1
			WHERE $4::bigint IS NULL OR usage.used < $4::bigint
			RETURNING 1)
		UPDATE messages SET triage = NULL, tri_category = NULL, tri_reply = NULL, tri_urgency = NULL
		WHERE id = $5 AND NOT EXISTS (SELECT 1 FROM spent)`, a.AccountID, a.Period, a.Feature, limit, messageRow)
}

// bodySize is what the thread size limit counts of a message: its text and HTML in
// characters.
func bodySize(text, html string) int {
	return utf8.RuneCountInString(text) + utf8.RuneCountInString(html)
}

// queueMessageParts queues in b what a new message row has beside it: labels, the
// protection detail, its raw bytes and its attachments, in chunks.
func (w *wtx) queueMessageParts(b *pgx.Batch, rowID int64, p *prepared) {
	n := &p.m
	if len(n.Labels) > 0 {
		b.Queue(`INSERT INTO message_labels(message_id, label) SELECT $1, l FROM unnest($2::text[]) l
			ON CONFLICT DO NOTHING`, rowID, n.Labels)
	}
	if p.detail != nil {
		b.Queue(`INSERT INTO protection_details(message_id, detail) VALUES ($1, $2)
			ON CONFLICT (message_id) DO UPDATE SET detail = excluded.detail`, rowID, *p.detail)
	}
	if raw := chunks(n.Trace, n.Raw); len(raw) > 0 {
		b.Queue(`INSERT INTO raw_chunks(message_id, seq, data) SELECT $1, x.n - 1, x.d FROM unnest($2::bytea[]) WITH ORDINALITY AS x(d, n)`,
			rowID, raw)
	}
	for i, a := range n.Attachments {
		b.Queue(`WITH a AS (INSERT INTO attachments(uuid, message_id, position, filename, content_type, size)
				VALUES ($1, $2, $3, $4, $5, $6) RETURNING id)
			INSERT INTO attachment_chunks(attachment_id, seq, data) SELECT a.id, x.n - 1, x.d FROM a, unnest($7::bytea[]) WITH ORDINALITY AS x(d, n)`,
			newRowUUID(), rowID, i, a.Filename, a.ContentType, len(a.Content), chunks("", a.Content))
	}
}

// chunks cuts head+rest into chunks of chunkSize bytes: head is the trace field the SMTP
// listener put before the bytes the client sent, never copied in front of them whole
// (only the first chunk is a copy; the others are rest's own bytes).
func chunks(head string, rest []byte) [][]byte {
	out := [][]byte{}
	if len(head) > 0 {
		k := min(len(rest), max(chunkSize-len(head), 0))
		out = append(out, append([]byte(head), rest[:k]...))
		rest = rest[k:]
	}
	for len(rest) > 0 {
		k := min(len(rest), chunkSize)
		out, rest = append(out, rest[:k]), rest[k:]
	}
	return out
}

// queueSettleThread queues in b what gives a thread made for message row (n) its
// aggregates, from the message itself: the thread counts no message yet (an empty thread
// never outlives a transaction).
func (w *wtx) queueSettleThread(b *pgx.Batch, threadRow, messageRow int64, n *db.NewMessage) {
	ts := millis(n.Timestamp)
	var received, sent *int64
	if n.Direction == db.Sent {
		sent = &ts
	} else {
		received = &ts
	}
	var l db.Participants
	l.Add(n.From, n.To, n.Cc)
	b.Queue(`UPDATE threads SET last_message = $1, last_ts = $2, message_count = 1, attachment_count = $3,
		received_ts = $4, sent_ts = $5, all_trashed = $6, quarantined = $7, senders = $8, recipients = $9, labels = $10
		WHERE id = $11 AND message_count = 0`,
		messageRow, ts, len(n.Attachments), received, sent, hasLabel(n.Labels, db.LabelTrash), n.Quarantined(),
		db.EncodeList(l.Senders), db.EncodeList(l.Recipients), db.EncodeList(db.LabelSet(n.Labels)), threadRow)
}

func hasLabel(labels []string, l string) bool {
	for _, x := range labels {
		if x == l {
			return true
		}
	}
	return false
}

// appendToThread adds a message to the aggregates of the thread it joined, locking the
// thread's row: from the row alone when the message is the thread's newest (a reply
// arriving: the common case); any other case recomputes them all.
func (w *wtx) appendToThread(threadRow, messageRow int64, n *db.NewMessage) error {
	ts, trashed := millis(n.Timestamp), hasLabel(n.Labels, db.LabelTrash)
	var (
		lastTS                      int64
		last                        *int64
		received, sent              *int64
		allTrashed, quarantined     bool
		senders, recipients, labels *string
	)
	err := w.queryRow(`SELECT last_ts, last_message, received_ts, sent_ts, all_trashed, quarantined, senders, recipients, labels
		FROM threads WHERE id = $1 FOR NO KEY UPDATE`, threadRow).Scan(&lastTS, &last, &received, &sent, &allTrashed, &quarantined, &senders, &recipients, &labels)
	if err != nil {
		return err
	}
	// Newest is by time, then row: rows are taken in one order and committed in another,
	// so a message of the thread's last millisecond may commit after one with a higher row.
	older := ts < lastTS || (ts == lastTS && last != nil && messageRow < *last)
	if older || senders == nil || recipients == nil || labels == nil {
		return w.refreshThread(threadRow)
	}
	newest := func(v *int64) *int64 {
		if v == nil || *v < ts {
			return &ts
		}
		return v
	}
	if n.Direction == db.Sent {
		sent = newest(sent)
	} else {
		received = newest(received)
	}
	var l db.Participants
	for _, a := range db.DecodeList(*senders) {
		l.Add(a, nil, nil)
	}
	l.Add("", db.DecodeList(*recipients), nil)
	l.Add(n.From, n.To, n.Cc)
	_, err = w.exec(`UPDATE threads SET last_message = $1, last_ts = $2, message_count = message_count + 1,
		attachment_count = attachment_count + $3, received_ts = $4, sent_ts = $5, all_trashed = $6, quarantined = $7,
		senders = $8, recipients = $9, labels = $10 WHERE id = $11`,
		messageRow, ts, len(n.Attachments), received, sent, allTrashed && trashed, quarantined && n.Quarantined(),
		db.EncodeList(l.Senders), db.EncodeList(l.Recipients), db.EncodeList(db.LabelSet(db.DecodeList(*labels), n.Labels)), threadRow)
	return err
}

// refreshThread recomputes a thread's aggregates from its messages, and drops a thread
// that has none left. One function keeps every writer of messages consistent with it.
func (w *wtx) refreshThread(threadID int64) error {
	// The row is locked first, in a statement of its own: the UPDATE's subqueries then read
	// the thread's messages as committed by whoever held the row before (READ COMMITTED
	// takes a snapshot per statement), not as they were when it began to wait for it.
	if _, err := w.exec("SELECT 1 FROM threads WHERE id = $1 FOR NO KEY UPDATE", threadID); err != nil {
		return err
	}
	_, err := w.exec(`UPDATE threads SET
		last_message = (SELECT id FROM messages WHERE thread_id = $1 ORDER BY ts DESC, id DESC LIMIT 1),
		last_ts = COALESCE((SELECT MAX(ts) FROM messages WHERE thread_id = $1), 0),
		message_count = (SELECT COUNT(*) FROM messages WHERE thread_id = $1),
		attachment_count = (SELECT COALESCE(SUM(attachment_count), 0) FROM messages WHERE thread_id = $1),
		received_ts = (SELECT MAX(ts) FROM messages WHERE thread_id = $1 AND direction = 'received'),
		sent_ts = (SELECT MAX(ts) FROM messages WHERE thread_id = $1 AND direction = 'sent'),
		all_trashed = NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = $1 AND NOT EXISTS
			(SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'trash')),
		quarantined = NOT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1 AND NOT quarantined)
		WHERE id = $1`, threadID)
	if err != nil {
		return err
	}
	tag, err := w.exec("DELETE FROM threads WHERE id = $1 AND message_count = 0", threadID)
	if err != nil || tag.RowsAffected() > 0 {
		return err
	}
	return w.keepThreadLists(threadID)
}

// keepThreadLists recomputes the lists a thread row keeps: senders and recipients in
// order of first appearance, and the union of its messages' labels.
func (w *wtx) keepThreadLists(threadID int64) error {
	rows, err := w.query("SELECT from_addr, to_addrs, cc_addrs FROM messages WHERE thread_id = $1 ORDER BY ts, id", threadID)
	if err != nil {
		return err
	}
	l, err := db.ScanParticipants(rows)
	rows.Close()
	if err != nil {
		return err
	}
	_, err = w.exec(`UPDATE threads SET senders = $1, recipients = $2, labels = (SELECT COALESCE(json_agg(label ORDER BY label), '[]')::text
		FROM (SELECT DISTINCT l.label FROM message_labels l JOIN messages m ON m.id = l.message_id WHERE m.thread_id = $3) d)
		WHERE id = $3`, db.EncodeList(l.Senders), db.EncodeList(l.Recipients), threadID)
	return err
}

func (u *unit) LabelTarget(inboxID int64, thread bool, id string) (db.LabelTarget, bool, error) {
	find := "SELECT id FROM messages WHERE inbox_id = $1 AND message_id = $2"
	if thread {
		find = "SELECT id FROM threads WHERE inbox_id = $1 AND uuid = $2"
	}
	t := db.LabelTarget{Thread: thread}
	err := u.queryRow(find, inboxID, id).Scan(&t.Row)
	if noRows(err) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	err = u.queryRow("SELECT EXISTS (SELECT 1 FROM messages m WHERE m.quarantined AND "+targetWhere(t)+")", t.Row).Scan(&t.Held)
	return t, true, err
}

// targetWhere is the condition on messages m that selects what t reaches; it takes t.Row
// as $1.
func targetWhere(t db.LabelTarget) string {
	if t.Thread {
		return "m.thread_id = $1"
	}
	return "m.id = $1"
}

func (u *unit) Relabel(t db.LabelTarget, add, remove []string) error {
	return u.applyLabels(add, remove, targetWhere(t), t.Row)
}

// applyLabels adds and removes labels on the messages matched by where (a condition on
// messages m whose one argument, $1, is arg), then refreshes their threads.
func (w *wtx) applyLabels(add, remove []string, where string, arg any) error {
	if len(add) > 0 {
		if _, err := w.exec(`INSERT INTO message_labels(message_id, label) SELECT m.id, l FROM messages m, unnest($2::text[]) l
			WHERE `+where+" ON CONFLICT DO NOTHING", arg, add); err != nil {
			return err
		}
	}
	if len(remove) > 0 {
		if _, err := w.exec("DELETE FROM message_labels WHERE label = ANY($2) AND message_id IN (SELECT m.id FROM messages m WHERE "+where+")",
			arg, remove); err != nil {
			return err
		}
	}
	rows, err := w.query("SELECT DISTINCT m.thread_id FROM messages m WHERE "+where, arg)
	if err != nil {
		return err
	}
	threads, err := db.ScanRows(rows, db.ScanInt64)
	rows.Close()
	if err != nil {
		return err
	}
	for _, t := range threads {
		if err := w.refreshThread(t); err != nil {
			return err
		}
	}
	// Trash and quarantine hide a message from search; other labels are not searched.
	if hasLabel(add, db.LabelTrash) || hasLabel(remove, db.LabelTrash) || hasLabel(add, db.LabelQuarantined) || hasLabel(remove, db.LabelQuarantined) {
		return w.enqueueIndex(where, arg)
	}
	return nil
}

func (u *unit) LabelsOf(t db.LabelTarget) (map[int64][]string, error) {
	rows, err := u.query("SELECT m.id, COALESCE(l.label, '') FROM messages m LEFT JOIN message_labels l ON l.message_id = m.id WHERE "+
		targetWhere(t)+" ORDER BY m.id, l.label", t.Row)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]string{}
	for rows.Next() {
		var id int64
		var l string
		if err := rows.Scan(&id, &l); err != nil {
			return nil, err
		}
		if l == "" {
			out[id] = []string{}
			continue
		}
		out[id] = append(out[id], l)
	}
	return out, rows.Err()
}

func (u *unit) ScannedMessage(uuid string) (*db.QuarantineItem, bool, error) {
	var it db.QuarantineItem
	var prot *string
	var quarantined bool
	err := u.queryRow(`SELECT m.id, i.account_id, i.address, m.message_id, m.protection, m.quarantined
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.uuid = $1 AND i.retired_at IS NULL`, uuid).
		Scan(&it.RowID, &it.AccountID, &it.Inbox, &it.MessageID, &prot, &quarantined)
	if noRows(err) || (err == nil && prot == nil) {
		return nil, false, db.Errorf(db.ECodeNotFound, "no scanned message %s", uuid)
	}
	if err != nil {
		return nil, false, err
	}
	if err := parseJSON(prot, &it.Protection); err != nil {
		return nil, false, err
	}
	return &it, quarantined, nil
}

func (u *unit) SetProtection(messageRow int64, p db.Protection, held bool) error {
	_, err := u.exec("UPDATE messages SET quarantined = $1, protection = $2 WHERE id = $3", held, jsonText(&p), messageRow)
	return err
}

// DeleteMessage deletes the message, refreshes its thread and then (the log lock comes
// last, log.go) queues the change for the search indexes, which drop what they no longer
// find.
func (u *unit) DeleteMessage(messageRow int64) error {
	var thread, inbox, ts int64
	if err := u.queryRow("DELETE FROM messages WHERE id = $1 RETURNING thread_id, inbox_id, ts", messageRow).Scan(&thread, &inbox, &ts); err != nil {
		return err
	}
	if err := u.refreshThread(thread); err != nil {
		return err
	}
	b := &pgx.Batch{}
	u.queueChanges(b, "SELECT $1::bigint, $2::bigint, $3::bigint", messageRow, inbox, ts)
	return u.send(b)
}

// rawOf returns the raw RFC 5322 bytes of message row, its chunks joined in the database
// (one round trip); nil when the message has none (or is gone).
func rawOf(ctx context.Context, q querier, messageRow int64) ([]byte, error) {
	var raw []byte
	err := q.QueryRow(ctx, "SELECT string_agg(data, ''::bytea ORDER BY seq) FROM raw_chunks WHERE message_id = $1", messageRow).Scan(&raw)
	return raw, err
}
