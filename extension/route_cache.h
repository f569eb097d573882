/*
 * route_cache.h
 *		Each backend's memory of the routes intake has read (route_cache.c).
 */
#ifndef WI_ROUTE_CACHE_H
#define WI_ROUTE_CACHE_H

#include "postgres.h"

#include "route_eval.h"

/* At library load: from then on no invalidation of routes goes unseen. */
extern void wi_route_cache_init(void);

/*
 * The generation to pass to wi_route_cache_put(): ask for it before taking
 * the snapshot the routes are read with.
 */
extern uint64 wi_route_cache_generation(void);

/*
 * Whether the route of (source id, kind, event type) is known: then *found
 * says whether there is one, and *route is a copy of it.
 */
extern bool wi_route_cache_get(int32 source_id, const char *kind, const char *event_type,
							   bool *found, WiRoute *route);

/* Keeps what a read found, unless an invalidation came since generation. */
extern void wi_route_cache_put(uint64 generation, int32 source_id, const char *kind,
							   const char *event_type, bool found, const WiRoute *route);

#endif							/* WI_ROUTE_CACHE_H */
