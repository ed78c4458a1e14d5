-- inboxd PostgreSQL schema, version 2: what triage knows of a queued message besides its
-- words (db.TriageSignals as JSON: the header fields of db.TriageHeaderNames and whether
-- the message answers mail its inbox sent), kept with the queue row so that an analysis
-- made later (on any process, or after a release from quarantine) sees what one made on
-- arrival sees. Rows queued before this version have none ('{}').
ALTER TABLE triage_queue ADD COLUMN signals text NOT NULL DEFAULT '{}';
