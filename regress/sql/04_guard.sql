-- upsert_object() and version_guard(): strictly newer wins, the tie rule, never last-write-wins.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

SELECT webhook_inbox.upsert_object('shop1', 'order', 'o1', 100, 'pending', '{"v":100}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o1', 101, 'paid', '{"v":101}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o1', 99, 'voided', '{"v":99}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o1', 101, 'paid', '{"v":101}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o1', 101, 'refunded', '{"v":101,"other":true}');
SELECT status, version, state FROM webhook_inbox.objects WHERE object_id = 'o1';
-- a one-second timestamp as version: equal seconds with other content is a tie, not an overwrite
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o2', extract(epoch FROM timestamptz '2026-01-01 10:00:05Z'), 'paid', '{"note":"a"}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o2', extract(epoch FROM timestamptz '2026-01-01 10:00:05Z'), 'paid', '{"note":"b"}');
-- NULL version: the provider's present state (a fetch) replaces what is stored
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o2', NULL, 'refunded', '{"note":"fetched"}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o2', NULL, 'refunded', '{"note":"fetched"}');
-- tombstones are final for versioned objects
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o3', 5, 'paid', '{}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o3', NULL, NULL, NULL, deleted => true);
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o3', 6, 'paid', '{}');
SELECT status, version, deleted FROM webhook_inbox.objects WHERE object_id = 'o3';
-- transitions record each applied status change, with its cause
SELECT object_id, from_status, to_status, version, cause FROM webhook_inbox.transitions
 WHERE object_id IN ('o1', 'o2', 'o3') ORDER BY id;
-- errors
SELECT webhook_inbox.upsert_object('nosuch', 'order', 'o1', 1, 'x', '{}');
SELECT webhook_inbox.upsert_object('shop1', NULL, 'o1', 1, 'x', '{}');
SELECT webhook_inbox.upsert_object('shop1', 'order', '', 1, 'x', '{}');
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o1', 'NaN', 'x', '{}');
-- fencing: a token older than the one that saved last is refused
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o4', 1, 'paid', '{}', claim_token => 1000);
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o4', 2, 'refunded', '{}', claim_token => 999);
SELECT webhook_inbox.upsert_object('shop1', 'order', 'o5', 1, 'paid', '{}', claim_token => 1);
SELECT count(*) AS fenced_rows_left FROM webhook_inbox.objects WHERE object_id = 'o5' AND status IS NULL;

-- version_guard on a user table
CREATE TABLE accounts (id int PRIMARY KEY, balance int, version bigint);
CREATE TRIGGER accounts_guard BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION webhook_inbox.version_guard();
INSERT INTO accounts VALUES (1, 10, 5);
UPDATE accounts SET balance = 20, version = 6 WHERE id = 1;
UPDATE accounts SET balance = 99, version = 4 WHERE id = 1;
UPDATE accounts SET balance = 98, version = 6 WHERE id = 1;
UPDATE accounts SET balance = 97, version = NULL WHERE id = 1;
SELECT * FROM accounts;
-- upserts too: the older write is skipped, not an error
INSERT INTO accounts VALUES (1, 50, 3) ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, version = EXCLUDED.version;
INSERT INTO accounts VALUES (1, 70, 9) ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, version = EXCLUDED.version;
SELECT * FROM accounts;
-- any ordered type, and a named column
CREATE TABLE docs (id int PRIMARY KEY, body text, modified timestamptz);
CREATE TRIGGER docs_guard BEFORE UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION webhook_inbox.version_guard('modified');
INSERT INTO docs VALUES (1, 'first', '2026-01-01 00:00:00Z');
UPDATE docs SET body = 'older', modified = '2025-12-31 00:00:00Z';
UPDATE docs SET body = 'newer', modified = '2026-01-02 00:00:00Z';
SELECT body, modified FROM docs;
-- misuse
CREATE TRIGGER bad_guard BEFORE UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION webhook_inbox.version_guard('nosuch');
UPDATE docs SET body = 'x';
DROP TRIGGER bad_guard ON docs;
CREATE TABLE blobs (id int, version json);
CREATE TRIGGER blob_guard BEFORE UPDATE ON blobs FOR EACH ROW EXECUTE FUNCTION webhook_inbox.version_guard();
INSERT INTO blobs VALUES (1, '1');
UPDATE blobs SET version = '2';
CREATE TRIGGER late_guard AFTER UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION webhook_inbox.version_guard();
UPDATE accounts SET version = 100;
DROP TRIGGER late_guard ON accounts;
CREATE TRIGGER two_args BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION webhook_inbox.version_guard('version', 'extra');
UPDATE accounts SET version = 101;
DROP TRIGGER two_args ON accounts;
SELECT webhook_inbox.version_guard();
