/* SPDX-License-Identifier: MIT */
/* Planted internal call: an object of models/ that declares one of the
 * library's internal fc__ functions itself (which no include root can
 * stop). models/check_public.sh must refuse it
 * (layering/models_internal_call_fails). */
void fc__planted_internal(void);
void planted_models_call(void);
void planted_models_call(void) { fc__planted_internal(); }
