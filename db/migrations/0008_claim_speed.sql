-- 0008_claim_speed: the fair-share claim (0007) at half the cost.
--
-- PL/pgSQL plans each statement of fb_claim_pick with the call's values for the
-- first five calls of a session, then compares that cost with a generic plan's;
-- the generic plans here carry the penalties of the function's SET clauses
-- (enable_seqscan = off) and lose, so every claim planned its five statements
-- again: 0.2 ms of a 0.45 ms pick.  The plans are the same whatever the values
-- (the index orders are the point), so the generic plan is forced.
ALTER FUNCTION fb_claim_pick(text[], text) SET plan_cache_mode = force_generic_plan;

-- An owner's running jobs (its share, its running seconds) without reading its
-- finished ones: jobs_owner_list_idx covers every job an owner ever had.
CREATE INDEX jobs_running_owner_idx ON jobs (owner_id) INCLUDE (started_at)
    WHERE state = 'running';
