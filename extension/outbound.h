/*
 * outbound.h
 *		The one gate every request to a provider passes (outbound.c).
 */
#ifndef WI_OUTBOUND_H
#define WI_OUTBOUND_H

/*
 * NULL when a request may leave now; else why not (palloc'd, no secret):
 * outbound work is paused (a restored copy).  Never raises for a pause.
 */
extern char *wi_outbound_gate(void);

/* the background worker's check of its cycle: true when the gate is open */
extern void wi_outbound_cycle_verdict(bool open);

#endif							/* WI_OUTBOUND_H */
