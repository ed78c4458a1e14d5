-- inboxd schema, version 7: a thread keeps the lists listThreads shows (JSON arrays):
-- its senders and recipients in order of first appearance and the union of its messages'
-- labels, kept by every writer of its messages (db.settleThread, db.refreshThread), so a
-- page of threads reads thread rows instead of every message of every thread. NULL (a
-- thread written before this version) means "not kept yet": it is computed when read.
ALTER TABLE threads ADD COLUMN senders TEXT;
ALTER TABLE threads ADD COLUMN recipients TEXT;
ALTER TABLE threads ADD COLUMN labels TEXT;
