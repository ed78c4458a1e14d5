-- inboxd schema, version 11: index_queue by inbox. A search matches the changes to its
-- inbox that the search index does not hold yet itself (search/tail.go), so every search
-- reads the queue rows of one inbox after a sequence number. Without this index that read
-- walked every pending row of every inbox: with mail arriving at 1,300 messages a second,
-- a couple of thousand rows, ~130 us of each search. The queue holds only what the index
-- has not persisted yet, so the index stays small.
CREATE INDEX index_queue_by_inbox ON index_queue(inbox);
