-- State machines: reachability, backward events, cycles refused, cache invalidated on change.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;

SELECT from_state, to_state FROM webhook_inbox.machines WHERE machine = 'payment' ORDER BY 1, 2;
SELECT webhook_inbox.transition_allowed('payment', 'unknown', 'captured') AS unknown_to_captured,
	   webhook_inbox.transition_allowed('payment', 'captured', 'pending') AS captured_to_pending,
	   webhook_inbox.transition_allowed('payment', 'pending', 'refunded') AS pending_to_refunded,
	   webhook_inbox.transition_allowed('payment', 'failed', 'captured') AS failed_to_captured,
	   webhook_inbox.transition_allowed('payment', 'settled', 'settled') AS settled_to_settled,
	   webhook_inbox.transition_allowed('payment', 'pending', 'teleported') AS unknown_state,
	   webhook_inbox.transition_allowed('payment', NULL, 'captured') AS null_state;
SELECT webhook_inbox.transition_allowed('nosuch', 'a', 'b');

-- events in any order: captured first, then the late pending and authorised are backward
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'captured', 11);
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'pending', 12);
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'authorised', 13);
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'captured', 14);
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'settled', 15);
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'refunded', 16);
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', 'failed', 17);
SELECT status FROM webhook_inbox.objects WHERE object_id = 'pi_m';
SELECT from_status, to_status, applied, reason, cause FROM webhook_inbox.transitions WHERE object_id = 'pi_m' ORDER BY id;
-- errors
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'nosuch', 'captured');
SELECT webhook_inbox.apply_transition('nosuch', 'payment', 'pi_m', 'payment', 'captured');
SELECT webhook_inbox.apply_transition('stripe1', 'payment', '', 'payment', 'captured');
SELECT webhook_inbox.apply_transition('stripe1', 'payment', 'pi_m', 'payment', NULL);

-- cycles are refused, self-loops too
INSERT INTO webhook_inbox.machines (machine, from_state, to_state) VALUES ('payment', 'refunded', 'pending');
INSERT INTO webhook_inbox.machines (machine, from_state, to_state) VALUES ('payment', 'settled', 'settled');
INSERT INTO webhook_inbox.machines (machine, from_state, to_state) VALUES ('loop', 'a', 'b'), ('loop', 'b', 'c'), ('loop', 'c', 'a');
-- a change is seen at once by the backend that cached the old machine
SELECT webhook_inbox.transition_allowed('payment', 'failed', 'refunded');
INSERT INTO webhook_inbox.machines (machine, from_state, to_state) VALUES ('payment', 'failed', 'refunded');
SELECT webhook_inbox.transition_allowed('payment', 'failed', 'refunded');
DELETE FROM webhook_inbox.machines WHERE machine = 'payment' AND from_state = 'failed';
SELECT webhook_inbox.transition_allowed('payment', 'failed', 'refunded');
-- a new machine
INSERT INTO webhook_inbox.machines (machine, from_state, to_state) VALUES
	('ticket', 'unknown', 'open'), ('ticket', 'open', 'solved'), ('ticket', 'solved', 'closed');
SELECT webhook_inbox.transition_allowed('ticket', 'unknown', 'closed'), webhook_inbox.transition_allowed('ticket', 'closed', 'open');
