/*
 * give_back.h
 *		Handing a claim back to the queue (give_back.c).
 */
#ifndef WI_GIVE_BACK_H
#define WI_GIVE_BACK_H

#include "postgres.h"

#include "step.h"

typedef enum GiveBack
{
	GIVE_RETRY,					/* counts an attempt: backoff, or delay */
	GIVE_DEFER,					/* no attempt counted: due again after delay */
	GIVE_QUARANTINE,			/* set aside for a person */
	GIVE_AUTH					/* quarantine, and flag the source */
} GiveBack;

extern void wi_give_back(const WiSteps *steps, int64 token, GiveBack how,
						 const char *reason, double delay_s, int http);

#endif							/* WI_GIVE_BACK_H */
