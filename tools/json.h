/*
 * json.h
 *		A minimal JSON reader for webhook-sim.
 *
 * The simulator writes JSON by hand (see sb_json_str in util.h); it only
 * needs to read small documents: recorded JSONL lines, request bodies of the
 * control and effect endpoints, and the truth document in verify.  This is a
 * strict recursive-descent parser into a small tree with a depth limit.
 */
#ifndef SIM_JSON_H
#define SIM_JSON_H

#include <stddef.h>

typedef enum jv_type
{
	JV_NULL,
	JV_BOOL,
	JV_NUM,
	JV_STR,
	JV_ARR,
	JV_OBJ
} jv_type;

typedef struct jv
{
	jv_type		type;
	int			boolean;		/* JV_BOOL */
	double		num;			/* JV_NUM */
	char	   *str;			/* JV_STR: decoded text; JV_NUM: raw text */
	size_t		slen;			/* length of str (strings may hold NUL) */
	size_t		n;				/* JV_ARR, JV_OBJ: number of members */
	char	  **keys;			/* JV_OBJ: member names */
	struct jv **items;			/* JV_ARR, JV_OBJ: member values */
} jv;

/*
 * Parse text[0..len) as one JSON value (surrounding whitespace allowed).
 * Returns a tree the caller frees with jv_free, or NULL with a message in
 * err (errlen bytes) when the input is not valid JSON.
 */
extern jv  *jv_parse(const char *text, size_t len, char *err, size_t errlen);
extern void jv_free(jv *v);

/* Member of an object by name, or NULL (also when v is not an object). */
extern const jv *jv_get(const jv *v, const char *key);

/* The string of a JV_STR, or NULL. */
extern const char *jv_string(const jv *v);

/*
 * Text of a scalar as it would compare: strings as-is, numbers as their raw
 * text, true/false; NULL for null, arrays and objects.
 */
extern const char *jv_scalar_text(const jv *v);

#endif							/* SIM_JSON_H */
