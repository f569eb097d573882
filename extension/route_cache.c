/*
 * route_cache.c
 *		Each backend's memory of the routes intake has read: for a (source,
 *		kind, event type), the route _route_of() gave, or that it gave none.
 *
 * Intake reads the route of each distinct event type of a batch; a
 * receiver's session reads the same few routes for every batch.  Kept
 * here, they cost a hash lookup instead of a statement.  The routes table
 * has a statement trigger (wi_routes_changed) that sends a relcache
 * invalidation, which every backend takes in by its next transaction
 * after the writer's commit, and that empties this cache.
 *
 * As machine.c's cache does, this one never keeps routes older than an
 * invalidation already taken in: the callback is registered when the
 * library loads, the caller reads the routes with the latest snapshot taken
 * after it asked for the generation, and every invalidation bumps the
 * generation, so that a read during which one came (it is taken in when the
 * read locks the table) serves its batch but is not kept.  Transactions
 * that read with their own snapshot (REPEATABLE READ, SERIALIZABLE) do not
 * use the cache at all, and read the routes their snapshot shows.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "fmgr.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "route_cache.h"
#include "webhook_inbox.h"

PG_FUNCTION_INFO_V1(wi_routes_changed);

/* The cache starts again once this many event types are held. */
#define ROUTE_CACHE_MAX		4096

/* source id, kind and event type, each text NUL-terminated */
#define ROUTE_KEY_LEN	(12 + NAMEDATALEN + 256)

typedef struct RouteEntry
{
	char		key[ROUTE_KEY_LEN];
	bool		found;
	WiRoute		route;
} RouteEntry;

static MemoryContext route_cxt = NULL;
static HTAB *route_hash = NULL;
static uint64 route_generation = 0;	/* bumped by every invalidation */
static Oid	routes_relid = InvalidOid;

static void
route_cache_invalidate(void)
{
	route_generation++;
	if (route_cxt != NULL)
		MemoryContextReset(route_cxt);
	route_hash = NULL;
}

static void
route_inval_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == routes_relid)
		route_cache_invalidate();
}

void
wi_route_cache_init(void)
{
	CacheRegisterRelcacheCallback(route_inval_callback, (Datum) 0);
}

uint64
wi_route_cache_generation(void)
{
	/* the table the callback listens for, should the extension be new */
	routes_relid = get_relname_relid("routes", get_namespace_oid("webhook_inbox", false));
	return route_generation;
}

/* The key of (source id, kind, event type), or false if it has none. */
static bool
route_key(char *key, int32 source_id, const char *kind, const char *event_type)
{
	int			n;

	if (kind == NULL || event_type == NULL)
		return false;
	memset(key, 0, ROUTE_KEY_LEN);
	n = snprintf(key, ROUTE_KEY_LEN, "%d/%s/%s", source_id, kind, event_type);
	return n >= 0 && n < ROUTE_KEY_LEN;
}

bool
wi_route_cache_get(int32 source_id, const char *kind, const char *event_type,
				   bool *found, WiRoute *route)
{
	char		key[ROUTE_KEY_LEN];
	RouteEntry *e;

	if (route_hash == NULL || !route_key(key, source_id, kind, event_type))
		return false;
	e = hash_search(route_hash, key, HASH_FIND, NULL);
	if (e == NULL)
		return false;
	*found = e->found;
	if (e->found)
	{
		/*
		 * A copy in the caller's memory: an invalidation may empty the
		 * cache at the batch's next lock, while the batch still reads it.
		 */
		*route = e->route;
		route->strategy = route->strategy ? pstrdup(route->strategy) : NULL;
		route->object_type = route->object_type ? pstrdup(route->object_type) : NULL;
		for (int p = 0; p < WI_PATH_COUNT; p++)
			if (route->has_path[p])
				route->path[p] = datumCopy(route->path[p], false, -1);
	}
	return true;
}

static char *
copy_text(const char *s)
{
	return s ? MemoryContextStrdup(route_cxt, s) : NULL;
}

void
wi_route_cache_put(uint64 generation, int32 source_id, const char *kind,
				   const char *event_type, bool found, const WiRoute *route)
{
	char		key[ROUTE_KEY_LEN];
	RouteEntry *e;
	bool		present;
	MemoryContext old;

	if (generation != route_generation || !route_key(key, source_id, kind, event_type))
		return;
	if (route_cxt == NULL)
		route_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_inbox routes",
										  ALLOCSET_SMALL_SIZES);
	if (route_hash != NULL && hash_get_num_entries(route_hash) >= ROUTE_CACHE_MAX)
	{
		MemoryContextReset(route_cxt);
		route_hash = NULL;
	}
	if (route_hash == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = ROUTE_KEY_LEN;
		ctl.entrysize = sizeof(RouteEntry);
		ctl.hcxt = route_cxt;
		route_hash = hash_create("webhook_inbox routes", 64, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	e = hash_search(route_hash, key, HASH_ENTER, &present);
	e->found = found;
	memset(&e->route, 0, sizeof(WiRoute));
	if (!found)
		return;
	old = MemoryContextSwitchTo(route_cxt);
	e->route = *route;
	e->route.strategy = copy_text(route->strategy);
	e->route.object_type = copy_text(route->object_type);
	for (int p = 0; p < WI_PATH_COUNT; p++)
		e->route.path[p] = route->has_path[p] ? datumCopy(route->path[p], false, -1) : (Datum) 0;
	MemoryContextSwitchTo(old);
}

/* Statement trigger on routes: empty every backend's cache at commit. */
Datum
wi_routes_changed(PG_FUNCTION_ARGS)
{
	wi_invalidate_trigger_table(fcinfo, "_routes_changed");
	route_cache_invalidate();
	return PointerGetDatum(NULL);
}
