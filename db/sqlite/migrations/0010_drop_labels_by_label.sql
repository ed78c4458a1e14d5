-- inboxd schema, version 10: drop message_labels_by_label. Every query of message_labels
-- names the message (labels of a message, "has label X" for a message, removing a label
-- from the messages of a thread), which the primary key (message_id, label) answers; no
-- query lists the messages of a label. The index cost each delivery's commit the pages
-- at the edge of every label it set (~8% of the bytes a stream of SMTP mail writes to
-- the WAL, scripts/smtpbench.sh) and ~24 bytes of file per message.
DROP INDEX message_labels_by_label;
