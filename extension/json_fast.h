/*
 * json_fast.h
 *		A delivery body's payload in one pass (json_fast.c), or by
 *		PostgreSQL's parser where that pass gives up, and the limits
 *		intake puts on what a body may nest and count.
 */
#ifndef WI_JSON_FAST_H
#define WI_JSON_FAST_H

#include "postgres.h"

#include "utils/jsonb.h"

#define WI_JSON_MAX_DEPTH		512		/* nesting of arrays and objects */
#define WI_JSON_MAX_NUM_DIGITS	10000	/* digits of one JSON number */
#define WI_JSON_MAX_NUM_EXP		1000	/* magnitude of its exponent */

extern bool wi_json_number_in_range(const char *s, int len, int *end);
extern Jsonb *wi_jsonb_fast(const char *data, int len);
extern Jsonb *wi_jsonb_parse(char *data, int len, char **why);

#endif
