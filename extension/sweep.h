/*
 * sweep.h
 *		Reconciliation sweeps (sweep.c and sweep_*.c), run by the worker when
 *		due and by sweep_now() on demand.
 */
#ifndef WI_SWEEP_H
#define WI_SWEEP_H

#include "postgres.h"

#include "step.h"

/*
 * Runs the sweeps that are due, looking at most once a second; true when
 * it stopped for the worker's round with passes left (sweep.c).
 */
extern bool wi_sweep_due(const WiSteps *steps);

/*
 * Lists the tenants of every source that may have some, once per
 * sweep_interval, ahead of the sweeps (tenants.c).
 */
extern void wi_tenants_due(const WiSteps *steps);

#endif							/* WI_SWEEP_H */
