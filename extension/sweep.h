/*
 * sweep.h
 *		Reconciliation sweeps (sweep.c), run by the worker when due and by
 *		sweep_now() on demand.
 */
#ifndef WI_SWEEP_H
#define WI_SWEEP_H

#include "postgres.h"

#include "step.h"

/* Runs the sweeps that are due; looks at most once a second. */
extern void wi_sweep_due(const WiSteps *steps);

/*
 * One pass of a layer ("incremental" or "full"); returns the sweep_runs id,
 * 0 when the type has no list API.
 */
extern void wi_tenants_due(const WiSteps *steps);
extern int64 wi_sweep_run(const WiSteps *steps, int32 source_id, const char *tenant, const char *object_type,
						  const char *layer, const char *trigger);

#endif							/* WI_SWEEP_H */
