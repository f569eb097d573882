/*
 * intake_json.h
 *		The fast path from a delivery's body to its jsonb payload
 *		(intake_json.c).
 */
#ifndef WI_INTAKE_JSON_H
#define WI_INTAKE_JSON_H

#include "utils/jsonb.h"

extern Jsonb *wi_json_fast(const char *data, int len, int max_depth, int max_digits,
						   int max_exp);

#endif							/* WI_INTAKE_JSON_H */
