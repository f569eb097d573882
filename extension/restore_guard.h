/*
 * restore_guard.h
 *		Outbound work waits in a restored copy of the database
 *		(restore_guard.c).
 */
#ifndef WI_RESTORE_GUARD_H
#define WI_RESTORE_GUARD_H

#include "step.h"

/* the background worker, once per cycle: true while outbound work waits */
extern bool wi_outbound_paused(const WiSteps *steps);

/* run_effects() and sweep_now(): raises while outbound work waits */
extern void wi_outbound_guard(void);

#endif							/* WI_RESTORE_GUARD_H */
