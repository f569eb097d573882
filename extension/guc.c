/*
 * guc.c
 *		The webhook_inbox.* settings, with units, bounds and defaults.
 *
 * Settings that only matter to the background worker are PGC_SIGHUP (or
 * PGC_POSTMASTER for the database it connects to); max_attempts is
 * PGC_SUSET so that retry() called from SQL sees the same limit.
 */
#include "postgres.h"

#include "utils/guc.h"

#include "seal.h"
#include "webhook_inbox.h"

char	   *wi_database = NULL;
bool		wi_enabled = true;
int			wi_fetch_concurrency = 16;
int			wi_batch_size = 100;
int			wi_local_batch_size = 1000;
int			wi_lease_ms = 30000;
int			wi_http_timeout_ms = 10000;
int			wi_max_attempts = 8;
int			wi_sweep_interval_s = 300;
int			wi_full_sweep_interval_s = 86400;
int			wi_sweep_overlap_s = 60;
int			wi_naptime_ms = 1000;
int			wi_fetch_delay_ms = 1000;
int			wi_tombstone_confirm_delay_s = 60;
int			wi_debug_machines_load_lock = 0;
bool		wi_debug_save_per_answer = false;
int			wi_sweep_lookback_s = 30 * 86400;
char	   *wi_effects_fault = NULL;
bool		wi_keep_heap = true;

/*
 * Read by SQL only (inbox_health, through current_setting()), so the C code
 * keeps no extern for it.
 */
static bool wi_require_synchronous_standby = false;
static int	wi_tenant_credentials_wait_s = 2 * 86400;	/* _tenant_auth_plan() */

/*
 * Define the settings.  The worker's database can only be chosen at server
 * start, so it exists only when the library is preloaded (a postmaster-level
 * setting cannot be created in a running server).
 */
void
wi_guc_init(bool preloading)
{
	if (preloading)
		DefineCustomStringVariable("webhook_inbox.database",
								   "Database in which the background worker processes the inbox.",
								   NULL, &wi_database, "postgres",
								   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("webhook_inbox.enabled",
							 "Whether the background worker processes the inbox.",
							 NULL, &wi_enabled, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.fetch_concurrency",
							"Maximum concurrent provider requests of the worker.",
							NULL, &wi_fetch_concurrency, 16, 1, 256,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.batch_size",
							"Maximum objects the worker claims at once.",
							NULL, &wi_batch_size, 100, 1, 10000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.local_batch_size",
							"Maximum objects the worker's fast path takes at once (events that need no provider request).",
							NULL, &wi_local_batch_size, 1000, 1, 10000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.lease",
							"How long a claim is exclusive before another worker may take the object over.",
							NULL, &wi_lease_ms, 30000, 100, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.http_timeout",
							"Timeout of one provider request.",
							NULL, &wi_http_timeout_ms, 10000, 100, 600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("webhook_inbox.key_file",
							   "File holding the 256-bit key that encrypts tenants' credentials and sources' secrets at rest (32 bytes, or 64 hexadecimal digits).",
							   "Kept outside the database, readable by the server's user only: a dump or a copied table holds ciphertext only.",
							   &wi_key_file, "",
							   PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.max_attempts",
							"Attempts before an event is quarantined.",
							NULL, &wi_max_attempts, 8, 1, 1000,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.sweep_interval",
							"Time between incremental reconciliation sweeps of one source and object type (0 disables).",
							NULL, &wi_sweep_interval_s, 300, 0, 7 * 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.full_sweep_interval",
							"Time between full reconciliation sweeps (every object, and the mirror's objects the provider no longer has) of one source and object type (0 disables).",
							NULL, &wi_full_sweep_interval_s, 86400, 0, 30 * 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.sweep_overlap",
							"How far before its checkpoint a sweep starts listing, for clock skew and late writes.",
							NULL, &wi_sweep_overlap_s, 60, 0, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.naptime",
							"Fallback wait of the worker when nothing wakes it.",
							NULL, &wi_naptime_ms, 1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.fetch_delay",
							"How long the notifications of a fetch-strategy object must be quiet before it is claimed.",
							"A burst of notifications for one object costs one fetch; under a stream that never goes quiet an event waits at most ten times this. 0 claims at once.",
							&wi_fetch_delay_ms, 1000, 0, 600 * 1000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.tombstone_confirm_delay",
							"How long after a read API's first 404/410 for an object a second one confirms the tombstone.",
							"Until confirmed, the tombstone does not win over a newer version, so a wrong api_base or a proxy's 404 cannot delete objects for good; the object's events wait (no attempt counted) and are fetched again after this delay.",
							&wi_tombstone_confirm_delay_s, 60, 0, 86400,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.tenant_credentials_wait",
							"How long the reads of a tenant without credentials wait for them before its events are quarantined.",
							"A shop that never installed the app (its deliveries registered it, nothing set its credentials) would be retried for ever: past this wait its events are quarantined unknown_tenant, once, and shown in queues. Tenants with credentials, a GitHub App's installations and Stripe's accounts never wait for this.",
							&wi_tenant_credentials_wait_s, 2 * 86400, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.sweep_lookback",
							"How far back the first incremental sweep of a (source, object type) lists, without a checkpoint.",
							"A provider with an events list uses its own window instead. Objects last changed before it are compared by the full layer.",
							&wi_sweep_lookback_s, 30 * 86400, 60, INT_MAX,
							PGC_SUSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_inbox.debug_machines_load_lock",
							"Test hook: transition_allowed() waits for this advisory lock between taking its snapshot and reading the machines.",
							"Lets a test commit a change of machines exactly while the cache is being loaded. 0 (the default) turns it off; leave it off in production.",
							&wi_debug_machines_load_lock, 0, 0, INT_MAX,
							PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomBoolVariable("webhook_inbox.debug_save_per_answer",
							 "Diagnostic: the worker saves fetched answers one _save_fetched() call each instead of one set-based _save_fetched_batch() per batch.",
							 "The same rules and transactions, answer by answer: the reference the set-based save is measured against (bench/worker.sh). Leave it off in production.",
							 &wi_debug_save_per_answer, false,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomStringVariable("webhook_inbox.effects_fault",
							   "Fault injection for testing crash boundaries of effects: after_claim or after_send.",
							   "Ends the session at that point, as a crash would. Leave empty in production.",
							   &wi_effects_fault, "",
							   PGC_SUSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomBoolVariable("webhook_inbox.require_synchronous_standby",
							 "Whether inbox_health warns (ha_warning) when this primary acknowledges commits without a synchronous standby.",
							 "A 2xx is a promise that the delivery survives a failover, which only synchronous replication keeps: on when the database has a standby.",
							 &wi_require_synchronous_standby, false,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("webhook_inbox.keep_heap",
							 "Whether a session that takes intake_batch() calls keeps freed heap memory for its next batch.",
							 "The first intake_batch() call made while it is on tunes the C library's allocator (glibc) for the rest of the session; off leaves its defaults. Turning it off later does not undo the tuning.",
							 &wi_keep_heap, true,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("webhook_inbox");
}
