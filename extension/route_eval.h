/*
 * route_eval.h
 *		What a route reads from an event's payload, in C: the paths of one
 *		route (a row of _route_of()) applied to one payload, as
 *		_classify_batch() applies them in SQL.
 */
#ifndef WI_ROUTE_EVAL_H
#define WI_ROUTE_EVAL_H

#include "postgres.h"

#include "utils/jsonb.h"

/* The paths of a route, in the order _classify_batch() evaluates them. */
typedef enum WiRoutePath
{
	WI_PATH_STATUS,
	WI_PATH_TYPE,
	WI_PATH_ID,
	WI_PATH_VERSION,
	WI_PATH_TIME,
	WI_PATH_COUNT
} WiRoutePath;

/* One route, as _route_of() returns it. */
typedef struct WiRoute
{
	int32		id;
	int32		version;
	char	   *strategy;
	bool		ignore;			/* class 'ignore': nothing is read */
	char	   *object_type;	/* the route's own type, or NULL */
	Datum		path[WI_PATH_COUNT];	/* jsonpath */
	bool		has_path[WI_PATH_COUNT];
	bool		tombstone;
} WiRoute;

/* What a route found in one payload; NULL where it found nothing. */
typedef struct WiClassified
{
	char	   *object_type;
	char	   *object_id;
	char	   *status_value;
	Datum		version;		/* numeric */
	bool		version_null;
	Datum		provider_time;	/* timestamptz */
	bool		time_null;
} WiClassified;

/* Nothing found: no strings, no version, no time. */
static inline void
wi_classified_clear(WiClassified *c)
{
	memset(c, 0, sizeof(*c));
	c->version_null = c->time_null = true;
}

extern void wi_route_apply(const WiRoute *route, Jsonb *payload, WiClassified *out);

#endif							/* WI_ROUTE_EVAL_H */
