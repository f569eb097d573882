/*
 * round.h
 *		One round of the background worker (round.c): claim, local work,
 *		fetches and their saves.
 */
#ifndef WI_ROUND_H
#define WI_ROUND_H

#include "postgres.h"

#include "step.h"

/*
 * Claims up to batch_size objects and processes them.  Returns true when
 * the claim was full, so there is probably more to do right away.
 */
extern bool wi_round_run(const WiSteps *steps);

#endif							/* WI_ROUND_H */
