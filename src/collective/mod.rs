//! Collective schedules. STUB: owned by the collective helper; replace wholesale.
